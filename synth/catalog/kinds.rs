//! The closed vocabularies of the tables: a row's library (`libtype`) and a catalog entry's role, parsed
//! once into enums (serde names are the words the files use).

use serde::{Deserialize, Serialize};

/// AITER's `libtype` column: which library a row's kernel comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Libtype {
    /// A CK legacy instance.
    Ck,
    /// A CK-tile instance.
    Cktile,
    /// A reference library row (e.g. a vendor BLAS): measured for comparison, never a candidate.
    Vendor,
    /// A config of the block-FP8 Triton family ([`crate::catalog::triton`]).
    Triton,
}

impl Libtype {
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
        assert_eq!(Libtype::parse(""), None);
        for (r, w) in [(Role::Candidate, "candidate"), (Role::Default, "default")] {
            assert_eq!(r.to_string(), w);
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{w}\""));
        }
    }
}
