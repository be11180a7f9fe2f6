fn main() {
    if let Err(e) = gemm_synth::cli::main_entry() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
