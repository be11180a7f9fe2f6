//! Renderers: AITER C++ dispatcher (minijinja templates in templates/) and a self-contained Rust module
//! (quote + prettyplease).
