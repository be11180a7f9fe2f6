//! The one minijinja setup of every C++/Python text template: blocks trim their own line, an undefined
//! variable is an error, nothing is HTML-escaped (the values that reach a template are already sanitized
//! by `render/sanitize.rs`), and a template keeps its trailing newline.

use minijinja::{AutoEscape, Environment, UndefinedBehavior};

/// An environment with the house settings holding `templates` (name, source). The sources are compiled into
/// the binary, so one that does not parse is a bug of this crate: it panics naming the template.
pub fn environment(templates: &[(&'static str, &'static str)]) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(true);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    for &(name, source) in templates {
        env.add_template(name, source).unwrap_or_else(|e| panic!("template {name} does not parse: {e:#}"));
    }
    env
}
