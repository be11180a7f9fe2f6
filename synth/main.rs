fn main() {
    let result = gemm_synth::cli::main_entry();
    if result.is_ok() && synth_base::stdout::failed() {
        synth_base::errln!("error: the output above is incomplete: standard output could not be written");
        std::process::exit(1);
    }
    if let Err(e) = result {
        // Text from inputs can sit in any message: control, bidi and invisible characters are shown as
        // code points so the message reads as what it says.
        synth_base::errln!("error: {}", synth_base::sanitize::shown_with(&format!("{e:#}"), true));
        let drift = e.downcast_ref::<gemm_synth::app::drift_remeasure::DriftDetected>().is_some();
        std::process::exit(if drift { gemm_synth::app::drift_remeasure::EXIT_DRIFT } else { 1 });
    }
}
