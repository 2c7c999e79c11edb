//! Event filter expressions (Documentation/trace/events.rst section 5): a small
//! parser that finds each `FIELD OP VALUE` predicate, so the validator can check
//! field names and operator/value types against the event's format.

use std::fmt;
use std::ops::Range;

use crate::compare::Cmp;

/// One `FIELD OP VALUE` predicate of a filter, with byte ranges inside the filter text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Predicate {
    /// The field name as written (may carry a `.function`/`.hex` suffix).
    pub(crate) field: String,
    /// Where the field name is.
    pub(crate) field_span: Range<usize>,
    /// `==`, `!=`, `<`, `<=`, `>`, `>=`, `&` or `~`.
    pub(crate) op: Op,
    /// Where the operator is.
    pub(crate) op_span: Range<usize>,
    /// The value.
    pub(crate) value: Value,
    /// Where the value is.
    pub(crate) value_span: Range<usize>,
}

/// A predicate's operator (events.rst 5.1): a comparison, or one of the two
/// operators the kernel's filters add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `==`, `!=`, `<`, `<=`, `>`, `>=`.
    Cmp(Cmp),
    /// `&`: a bitwise and, true when not zero (numeric fields).
    BitAnd,
    /// `~`: a glob match (string fields).
    Glob,
}

impl Op {
    /// The operator as written.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Op::Cmp(c) => c.as_str(),
            Op::BitAnd => "&",
            Op::Glob => "~",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A predicate's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// A number (decimal, `0x` hex, negative), as written.
    Number(String),
    /// A quoted string.
    Quoted(String),
    /// A bare word (a string without quotes, or a symbol).
    Word(String),
}

/// A filter's structure: `&&` binds tighter than `||` (as in the kernel's
/// filter parser); leaves index the predicates [`parse_expr`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Expr {
    /// The predicate at this index.
    Pred(usize),
    /// `!EXPR`.
    Not(Box<Expr>),
    /// Both hold.
    And(Box<Expr>, Box<Expr>),
    /// Either holds.
    Or(Box<Expr>, Box<Expr>),
}

/// A syntax error in a filter, with its byte range inside the filter text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    /// What is wrong.
    pub(crate) message: String,
    /// Where.
    pub(crate) span: Range<usize>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Num,
    Str(String),
    Op(Op),
    And,
    Or,
    Not,
    LParen,
    RParen,
}

fn tokenize(text: &str) -> Result<Vec<(Tok, Range<usize>)>, SyntaxError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c.is_ascii_control() {
            return Err(SyntaxError {
                message: "control character in filter".into(),
                span: i..i + 1,
            });
        }
        let two = text.get(i..i + 2).unwrap_or("");
        let tok = match two {
            "&&" => Some((Tok::And, 2)),
            "||" => Some((Tok::Or, 2)),
            _ => text
                .get(i..)
                .and_then(Cmp::prefix)
                .map(|c| (Tok::Op(Op::Cmp(c)), c.as_str().len())),
        };
        if let Some((t, len)) = tok {
            i += len;
            out.push((t, start..i));
            continue;
        }
        let tok = match c {
            b'&' => Tok::Op(Op::BitAnd),
            b'~' => Tok::Op(Op::Glob),
            b'!' => Tok::Not,
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b'"' | b'\'' => {
                let end = text[i + 1..].find(c as char).ok_or(SyntaxError {
                    message: "unterminated string".into(),
                    span: i..text.len(),
                })?;
                let s = text[i + 1..i + 1 + end].to_string();
                i += end + 2;
                out.push((Tok::Str(s), start..i));
                continue;
            }
            b'-' | b'0'..=b'9' => {
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric()) {
                    i += 1;
                }
                let word = &text[start..i];
                let digits = word.trim_start_matches('-');
                let ok = if let Some(hex) = digits
                    .strip_prefix("0x")
                    .or_else(|| digits.strip_prefix("0X"))
                {
                    !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit())
                } else {
                    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
                };
                if ok {
                    out.push((Tok::Num, start..i));
                } else {
                    out.push((Tok::Ident(word.to_string()), start..i));
                }
                continue;
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c == b'*' || c == b'/' || c == b'.' => {
                i += 1;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || matches!(b[i], b'_' | b'.' | b'*' | b'?' | b'/' | b'-' | b'[' | b']'))
                {
                    i += 1;
                }
                out.push((Tok::Ident(text[start..i].to_string()), start..i));
                continue;
            }
            _ => {
                return Err(SyntaxError {
                    message: format!("unexpected `{}`", &text[i..].chars().next().unwrap_or(' ')),
                    span: i..i + 1,
                });
            }
        };
        i += 1;
        out.push((tok, start..i));
    }
    Ok(out)
}

/// Parses `text` and returns its predicates in order.
///
/// Grammar: `expr := term (("&&" | "||") term)*`, `term := "!"? ("(" expr ")" | pred)`,
/// `pred := FIELD OP VALUE`. Errors: the first syntax error, with its range.
pub(crate) fn parse(text: &str) -> Result<Vec<Predicate>, SyntaxError> {
    parse_expr(text).map(|(_, preds)| preds)
}

/// Parses `text` into its structure and its predicates (see [`parse`]).
pub(crate) fn parse_expr(text: &str) -> Result<(Expr, Vec<Predicate>), SyntaxError> {
    let toks = tokenize(text)?;
    let mut p = Parser {
        text,
        toks: &toks,
        pos: 0,
        end: text.len(),
        preds: Vec::new(),
    };
    if toks.is_empty() {
        return Err(SyntaxError {
            message: "empty filter".into(),
            span: 0..text.len(),
        });
    }
    let e = p.expr(0)?;
    if let Some((_, span)) = toks.get(p.pos) {
        return Err(SyntaxError {
            message: "expected `&&`, `||` or the end of the filter".into(),
            span: span.clone(),
        });
    }
    Ok((e, p.preds))
}

struct Parser<'a> {
    text: &'a str,
    toks: &'a [(Tok, Range<usize>)],
    pos: usize,
    end: usize,
    preds: Vec<Predicate>,
}

impl Parser<'_> {
    fn next(&mut self) -> Option<(Tok, Range<usize>)> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn eof(&self) -> SyntaxError {
        SyntaxError {
            message: "filter ends too early".into(),
            span: self.end..self.end,
        }
    }

    fn expr(&mut self, depth: usize) -> Result<Expr, SyntaxError> {
        if depth > 32 {
            return Err(SyntaxError {
                message: "filter nests too deep".into(),
                span: 0..self.end,
            });
        }
        let mut ors = Vec::new();
        let mut and = self.term(depth)?;
        while let Some((op @ (Tok::And | Tok::Or), _)) = self.toks.get(self.pos) {
            let is_and = *op == Tok::And;
            self.pos += 1;
            let t = self.term(depth)?;
            if is_and {
                and = Expr::And(Box::new(and), Box::new(t));
            } else {
                ors.push(std::mem::replace(&mut and, t));
            }
        }
        Ok(ors
            .into_iter()
            .rev()
            .fold(and, |right, left| Expr::Or(Box::new(left), Box::new(right))))
    }

    fn term(&mut self, depth: usize) -> Result<Expr, SyntaxError> {
        let (tok, span) = self.next().ok_or_else(|| self.eof())?;
        match tok {
            Tok::Not => Ok(Expr::Not(Box::new(self.term(depth + 1)?))),
            Tok::LParen => {
                let e = self.expr(depth + 1)?;
                match self.next() {
                    Some((Tok::RParen, _)) => Ok(e),
                    Some((_, s)) => Err(SyntaxError {
                        message: "expected `)`".into(),
                        span: s,
                    }),
                    None => Err(SyntaxError {
                        message: "missing `)`".into(),
                        span,
                    }),
                }
            }
            Tok::Ident(field) => {
                let (op, op_span) = match self.next() {
                    Some((Tok::Op(op), s)) => (op, s),
                    Some((_, s)) => {
                        return Err(SyntaxError {
                            message: format!(
                                "expected an operator (==, !=, <, <=, >, >=, &, ~) after `{field}`"
                            ),
                            span: s,
                        });
                    }
                    None => return Err(self.eof()),
                };
                let (value, value_span) = match self.next() {
                    Some((Tok::Num, s)) => (Value::Number(self.text[s.clone()].to_string()), s),
                    Some((Tok::Str(s), sp)) => (Value::Quoted(s), sp),
                    Some((Tok::Ident(w), sp)) => (Value::Word(w), sp),
                    Some((_, s)) => {
                        return Err(SyntaxError {
                            message: "expected a value".into(),
                            span: s,
                        });
                    }
                    None => return Err(self.eof()),
                };
                self.preds.push(Predicate {
                    field,
                    field_span: span,
                    op,
                    op_span,
                    value,
                    value_span,
                });
                Ok(Expr::Pred(self.preds.len() - 1))
            }
            _ => Err(SyntaxError {
                message: "expected a field name, `(` or `!`".into(),
                span,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_predicate() {
        let p = parse("(ret < 0 && comm == \"bash\") || !(pid != 0x10) || filename ~ \"/etc/*\"")
            .unwrap();
        let fields: Vec<_> = p
            .iter()
            .map(|p| (p.field.as_str(), p.op.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                ("ret", "<"),
                ("comm", "=="),
                ("pid", "!="),
                ("filename", "~")
            ]
        );
        assert_eq!(p[1].value, Value::Quoted("bash".into()));
        assert_eq!(p[0].field_span, 1..4);
    }

    #[test]
    fn and_binds_tighter_than_or() {
        let (e, _) = parse_expr("a == 1 || b == 2 && !c == 3").unwrap();
        let p = |i| Box::new(Expr::Pred(i));
        assert_eq!(
            e,
            Expr::Or(p(0), Box::new(Expr::And(p(1), Box::new(Expr::Not(p(2))))))
        );
    }

    #[test]
    fn reports_syntax_errors_with_place() {
        assert_eq!(parse("ret <").unwrap_err().message, "filter ends too early");
        let e = parse("ret 0").unwrap_err();
        assert_eq!(e.span, 4..5);
        assert!(parse("ret == 0 &&").is_err());
        assert!(parse("(ret == 0").is_err());
        assert!(parse("ret == 0\nenable").is_err());
    }
}
