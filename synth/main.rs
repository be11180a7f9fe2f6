fn main() {
    if let Err(e) = gemm_synth::cli::main_entry() {
        eprintln!("error: {e:#}");
        let drift = e.downcast_ref::<gemm_synth::app::drift_remeasure::DriftDetected>().is_some();
        std::process::exit(if drift { gemm_synth::app::drift_remeasure::EXIT_DRIFT } else { 1 });
    }
}
