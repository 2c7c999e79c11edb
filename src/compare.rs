//! The comparison operators `==`, `!=`, `<`, `<=`, `>`, `>=`, defined once for
//! the three places that read them: the expression language of `[[expect]]` and
//! `diff --fail-if` ([`crate::expr`]), event filters as the kernel parses them
//! ([`crate::validate::filter`], which adds `&` and `~`), and the filter of
//! `report -F` ([`crate::analysis`]), which evaluates those event filters on
//! the records of a trace.

use std::fmt;

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Cmp {
    /// Every operator, the two-character ones first, so that [`Cmp::prefix`]
    /// reads `<=` rather than `<`.
    const ALL: [Cmp; 6] = [Cmp::Eq, Cmp::Ne, Cmp::Le, Cmp::Ge, Cmp::Lt, Cmp::Gt];

    /// The operator as written.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }

    /// The operator `text` starts with, the longest one (`<=` rather than `<`);
    /// `None` when it starts with none. Its length is `as_str().len()`.
    pub(crate) fn prefix(text: &str) -> Option<Cmp> {
        Cmp::ALL.into_iter().find(|c| text.starts_with(c.as_str()))
    }

    /// Whether `a OP b` holds.
    pub(crate) fn holds<T: PartialOrd + ?Sized>(self, a: &T, b: &T) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
        }
    }
}

impl fmt::Display for Cmp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_longest_operator_and_applies_it() {
        let read = |t: &str| Cmp::prefix(t).map(Cmp::as_str);
        assert_eq!(read("<= 3"), Some("<="));
        assert_eq!(read("< 3"), Some("<"));
        assert_eq!(read(">=3"), Some(">="));
        assert_eq!(read(">3"), Some(">"));
        assert_eq!(read("== 1"), Some("=="));
        assert_eq!(read("!= 1"), Some("!="));
        assert_eq!(read("= 1"), None);
        assert_eq!(read("! 1"), None);
        assert_eq!(read(""), None);
        for c in Cmp::ALL {
            assert_eq!(Cmp::prefix(c.as_str()), Some(c));
            assert_eq!(c.to_string(), c.as_str());
        }
        let table = [
            (Cmp::Eq, [false, true, false]),
            (Cmp::Ne, [true, false, true]),
            (Cmp::Lt, [true, false, false]),
            (Cmp::Le, [true, true, false]),
            (Cmp::Gt, [false, false, true]),
            (Cmp::Ge, [false, true, true]),
        ];
        for (c, want) in table {
            assert_eq!([1, 2, 3].map(|a| c.holds(&a, &2)), want, "{c}");
            assert_eq!(["a", "b", "c"].map(|a| c.holds(a, "b")), want, "{c}");
        }
        assert!(!Cmp::Eq.holds(&f64::NAN, &f64::NAN));
        assert!(Cmp::Ne.holds(&f64::NAN, &f64::NAN));
    }
}
