//! Function arguments as the kernel's `trace` file prints them (Linux 6.15+,
//! the tracer options `func-args` and `funcgraph-args`).
//!
//! With either option on, each `ftrace:function` and `ftrace:funcgraph_entry`
//! record ends in `unsigned long args[]`: the argument registers of the call
//! (FTRACE_REGS_MAX_ARGS of them: 6 on x86-64, 8 on arm64). A record does not
//! carry the function's prototype; the kernel names and types the values by
//! BTF when it prints them (kernel/trace/trace_output.c
//! `print_function_args`), so a reader needs the prototypes of the traced
//! functions, which [`Prototypes`] holds (saved by the run that recorded the
//! file). trace-cmd 3.1.6 prints no arguments (its function plugin and
//! function graph handlers read `ip`/`func` and `depth` only).
//!
//! What `print_function_args` prints, reproduced by [`write_args`]: `(`, then
//! per parameter `NAME=VALUE` joined by `, `, then `)`. The value is the next
//! register, after typedefs and qualifiers of the parameter's type: a pointer
//! `0x%lx`; a signed integer `%ld`; an unsigned one (bool included) `0x%lx`;
//! an enum `%ld`; an unknown type `?0x%lx`; anything else (a struct or union
//! passed by value, ...) `(KIND)[0x%lx:0x%lx...]` with one register per
//! `long` of its size. The whole register is printed, never cut to the
//! parameter's size. Past the last register: `...` and the end. A function
//! the kernel's BTF does not describe prints `()`.

use std::collections::HashMap;

/// How one parameter's value is printed (its BTF kind after typedefs and
/// `const`/`volatile`/`restrict`/type tags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgKind {
    /// BTF_KIND_PTR: `0x%lx`.
    Pointer,
    /// BTF_KIND_INT with BTF_INT_SIGNED: `%ld`.
    Signed,
    /// BTF_KIND_INT without BTF_INT_SIGNED (also `bool`, `char`): `0x%lx`.
    Unsigned,
    /// BTF_KIND_ENUM: `%ld`.
    Enum,
    /// No type (BTF id 0, BTF_KIND_UNKN): `?0x%lx`.
    Unknown,
    /// Any other kind: `(KIND)[0x%lx...]`, one register per `long` of
    /// `size` bytes.
    Other {
        /// The kernel's name of the kind (`STRUCT`, `UNION`, `ENUM64`,
        /// `FLOAT`, ...; kernel/bpf/btf.c `btf_kind_str`).
        kind: String,
        /// Bytes (the type's `size`).
        size: u32,
    },
}

/// One parameter: its BTF name (may be empty) and how it prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// The name printed before `=`.
    pub name: String,
    /// How the value prints.
    pub kind: ArgKind,
}

/// The prototypes of the functions a file's records name, by function name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Prototypes(pub HashMap<String, Vec<Param>>);

impl Prototypes {
    /// The parameters of `func`, when its prototype is known.
    pub fn get(&self, func: &str) -> Option<&[Param]> {
        self.0.get(func).map(Vec::as_slice)
    }
}

/// Appends the kernel's `(NAME=VALUE, ...)` for a call of a function with
/// parameters `params` (`None`: not in BTF, `()`) and argument registers
/// `regs` (the record's `args[]`, as many as the architecture saves), on a
/// machine whose `long` is `long` bytes (a struct by value takes one
/// register per `long` of its size).
pub fn write_args(out: &mut Vec<u8>, params: Option<&[Param]>, regs: &[u64], long: u32) {
    out.push(b'(');
    let mut a = 0usize;
    for (p, param) in params.unwrap_or(&[]).iter().enumerate() {
        if p > 0 {
            out.extend_from_slice(b", ");
        }
        if a >= regs.len() {
            out.extend_from_slice(b"...");
            break;
        }
        let reg = regs[a];
        out.extend_from_slice(param.name.as_bytes());
        out.push(b'=');
        match &param.kind {
            ArgKind::Pointer | ArgKind::Unsigned => push_hex(out, reg),
            ArgKind::Signed | ArgKind::Enum => {
                out.extend_from_slice(itoa::Buffer::new().format(reg as i64).as_bytes());
            }
            ArgKind::Unknown => {
                out.push(b'?');
                push_hex(out, reg);
            }
            ArgKind::Other { kind, size } => {
                out.push(b'(');
                out.extend_from_slice(kind.as_bytes());
                out.extend_from_slice(b")[");
                push_hex(out, reg);
                let mut x = long.max(1);
                while x < *size {
                    out.push(b':');
                    a += 1;
                    if a >= regs.len() {
                        out.extend_from_slice(b"...]");
                        out.push(b')');
                        return;
                    }
                    push_hex(out, regs[a]);
                    x += long.max(1);
                }
                out.push(b']');
            }
        }
        a += 1;
    }
    out.push(b')');
}

/// `0x` and `v` in lower-case hex.
fn push_hex(out: &mut Vec<u8>, v: u64) {
    use std::io::Write;
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{v:#x}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, kind: ArgKind) -> Param {
        Param {
            name: name.into(),
            kind,
        }
    }

    fn text(params: Option<&[Param]>, regs: &[u64]) -> String {
        let mut out = Vec::new();
        write_args(&mut out, params, regs, 8);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn each_kind_prints_as_print_function_args_prints_it() {
        let params = [
            p("file", ArgKind::Pointer),
            p("n", ArgKind::Signed),
            p("count", ArgKind::Unsigned),
            p("e", ArgKind::Enum),
            p("", ArgKind::Unknown),
        ];
        let regs = [0xffff_8880_0123_4000, (-3i64) as u64, 16, 2, 7, 0];
        assert_eq!(
            text(Some(&params), &regs),
            "(file=0xffff888001234000, n=-3, count=0x10, e=2, =?0x7)"
        );
        assert_eq!(text(None, &regs), "()");
        assert_eq!(text(Some(&[]), &regs), "()");
    }

    #[test]
    fn a_struct_by_value_takes_a_register_per_long_and_the_registers_run_out() {
        let s = ArgKind::Other {
            kind: "STRUCT".into(),
            size: 16,
        };
        let params = [
            p("a", ArgKind::Signed),
            p("s", s.clone()),
            p("b", ArgKind::Signed),
        ];
        assert_eq!(
            text(Some(&params), &[1, 2, 3, 4]),
            "(a=1, s=(STRUCT)[0x2:0x3], b=4)"
        );
        assert_eq!(
            text(Some(&params), &[1, 2, 3]),
            "(a=1, s=(STRUCT)[0x2:0x3], ...)"
        );
        assert_eq!(text(Some(&params), &[1, 2]), "(a=1, s=(STRUCT)[0x2:...])");
        // A 4-byte `long`: an 8-byte struct takes two registers.
        let mut out = Vec::new();
        let u = ArgKind::Other {
            kind: "UNION".into(),
            size: 8,
        };
        write_args(
            &mut out,
            Some(&[p("u", u), p("b", ArgKind::Signed)]),
            &[1, 2, 3],
            4,
        );
        assert_eq!(String::from_utf8(out).unwrap(), "(u=(UNION)[0x1:0x2], b=3)");
    }
}
