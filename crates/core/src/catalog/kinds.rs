//! The closed vocabularies of the tables: a row's library (`libtype`) and a catalog entry's role, parsed
//! once into enums (serde names are the words the files use).

use serde::{Deserialize, Serialize};

/// AITER's `libtype` column: which library a row's kernel comes from.
///
/// It is also a candidate's *backend*: which library runs the kernel a rule picks. The order
/// (`ck` < `cktile` < `vendor` < `triton`) orders candidates of a mixed table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Libtype {
    /// A CK legacy instance.
    #[default]
    Ck,
    /// A CK-tile instance.
    Cktile,
    /// The vendor's blockwise FP8 GEMM (cuBLAS / hipBLASLt through `torch._scaled_mm`): a reference row,
    /// and a candidate only where the runtime can call it (`--backends ... vendor`).
    Vendor,
    /// A config of the block-FP8 Triton family ([`crate::catalog::triton`]).
    Triton,
}

impl Libtype {
    /// Every backend, in order.
    pub const ALL: [Libtype; 4] = [Libtype::Ck, Libtype::Cktile, Libtype::Vendor, Libtype::Triton];

    /// Whether this is the CK legacy backend (what every rule of the tool returned before backends).
    pub fn is_ck(&self) -> bool {
        *self == Libtype::Ck
    }

    /// The word in the files.
    pub fn as_str(self) -> &'static str {
        match self {
            Libtype::Ck => "ck",
            Libtype::Cktile => "cktile",
            Libtype::Vendor => "vendor",
            Libtype::Triton => "triton",
        }
    }

    /// Parses the word in the files (exact, lowercase).
    pub fn parse(s: &str) -> Option<Libtype> {
        match s {
            "ck" => Some(Libtype::Ck),
            "cktile" => Some(Libtype::Cktile),
            "vendor" => Some(Libtype::Vendor),
            "triton" => Some(Libtype::Triton),
            _ => None,
        }
    }
}

impl std::fmt::Display for Libtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The backends a target runtime can call (`--backends ck,triton,vendor`): which rows of a table are
/// candidates. Vendor rows of a table whose backends leave `vendor` out stay a reference, as without
/// backends.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Backends(std::collections::BTreeSet<Libtype>);

impl Backends {
    /// The set of `list` (an empty list is an error: no backend could run anything).
    pub fn new(list: &[Libtype]) -> Result<Backends, String> {
        if list.is_empty() {
            return Err("--backends names no backend: give one or more of ck, cktile, triton, vendor".into());
        }
        Ok(Backends(list.iter().copied().collect()))
    }

    /// Parses `ck,triton,vendor` (words separated by commas, each once).
    pub fn parse(text: &str) -> Result<Backends, String> {
        let mut out = Vec::new();
        for word in text.split(',') {
            let b = Libtype::parse(word.trim()).ok_or_else(|| {
                format!("--backends: {word:?} is not a backend; expected a comma-separated list of ck, cktile, triton, vendor")
            })?;
            if out.contains(&b) {
                return Err(format!("--backends: {b} is named twice"));
            }
            out.push(b);
        }
        Backends::new(&out)
    }

    /// Whether `b` is one of them.
    pub fn contains(&self, b: Libtype) -> bool {
        self.0.contains(&b)
    }

    /// The backends, in [`Libtype`] order.
    pub fn iter(&self) -> impl Iterator<Item = Libtype> + '_ {
        self.0.iter().copied()
    }

    /// Number of backends.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true (a set is built with at least one backend); for clippy's `len` rule.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Display for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let words: Vec<&str> = self.0.iter().map(|b| b.as_str()).collect();
        f.write_str(&words.join(","))
    }
}

/// A catalog entry's `role` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A selectable kernel (kernelId >= 0).
    Candidate,
    /// AITER's default kernel (kernelId -1), an alias of a candidate.
    Default,
}

impl Role {
    /// The word in the files.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Candidate => "candidate",
            Role::Default => "default",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_through_parse_display_and_serde() {
        for (t, w) in
            [(Libtype::Ck, "ck"), (Libtype::Cktile, "cktile"), (Libtype::Vendor, "vendor"), (Libtype::Triton, "triton")]
        {
            assert_eq!(Libtype::parse(w), Some(t));
            assert_eq!(t.to_string(), w);
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{w}\""));
            assert_eq!(serde_json::from_str::<Libtype>(&format!("\"{w}\"")).unwrap(), t);
        }
        assert_eq!(Libtype::parse("CK"), None);
        let b = Backends::parse("vendor,ck").unwrap();
        assert_eq!(b.to_string(), "ck,vendor");
        assert!(b.contains(Libtype::Vendor) && !b.contains(Libtype::Triton));
        assert!(Backends::parse("ck,ck").unwrap_err().contains("named twice"));
        assert!(Backends::parse("ck,cuda").unwrap_err().contains("\"cuda\" is not a backend"));
        assert_eq!(Libtype::parse(""), None);
        for (r, w) in [(Role::Candidate, "candidate"), (Role::Default, "default")] {
            assert_eq!(r.to_string(), w);
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{w}\""));
        }
    }
}
