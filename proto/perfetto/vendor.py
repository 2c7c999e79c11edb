#!/usr/bin/env python3
"""Copies the Perfetto .proto files trace-recipe writes from an upstream
checkout (README.md says which release) into this folder:

    proto/perfetto/vendor.py UPSTREAM_CHECKOUT

Comments are removed (the licence header is kept). The leaf files (the
ftrace events' messages, the process tree) are copied whole; the containers
(Trace, TracePacket, FtraceEventBundle, FtraceEvent) keep only the fields
the export writes, with their upstream names, numbers and types, and the
imports those need: a reader with the full upstream protos reads the same
bytes."""

import pathlib
import re
import sys

FTRACE = "protos/perfetto/trace/ftrace/"
LEAVES = [
    FTRACE + "ftrace.proto",
    FTRACE + "generic.proto",
    FTRACE + "irq.proto",
    FTRACE + "power.proto",
    FTRACE + "sched.proto",
    FTRACE + "task.proto",
    "protos/perfetto/trace/ps/process_tree.proto",
]
# file: (its message, the imports kept, the fields and oneofs kept; None: all)
CONTAINERS = {
    "protos/perfetto/trace/trace.proto": (
        "Trace",
        ["protos/perfetto/trace/trace_packet.proto"],
        None,
    ),
    "protos/perfetto/trace/trace_packet.proto": (
        "TracePacket",
        [FTRACE + "ftrace_event_bundle.proto", "protos/perfetto/trace/ps/process_tree.proto"],
        {"timestamp", "data", "process_tree", "ftrace_events",
         "optional_trusted_packet_sequence_id", "trusted_packet_sequence_id"},
    ),
    FTRACE + "ftrace_event_bundle.proto": (
        "FtraceEventBundle",
        [FTRACE + "ftrace_event.proto"],
        {"cpu", "event", "lost_events"},
    ),
    FTRACE + "ftrace_event.proto": (
        "FtraceEvent",
        LEAVES[:6],
        {"timestamp", "pid", "common_flags", "event", "print", "generic",
         "sched_switch", "sched_wakeup", "sched_waking", "sched_wakeup_new",
         "sched_process_exec", "sched_process_fork", "sched_process_exit",
         "sched_process_free", "task_newtask", "task_rename", "cpu_frequency",
         "cpu_idle", "irq_handler_entry", "irq_handler_exit", "softirq_entry",
         "softirq_exit"},
    ),
}
NOTE = "// Vendored by trace-recipe: comments removed{}.\n"


def header_and_body(text: str) -> tuple[str, str]:
    """The licence header (a leading /* */ block) and the rest without
    comments."""
    header = ""
    m = re.match(r"\s*/\*.*?\*/\n", text, re.S)
    if m:
        header, text = m.group(0).lstrip() + "\n", text[m.end():]
    body = "\n".join(re.sub(r"\s*//.*$", "", line) for line in text.splitlines())
    return header, body


def strip(text: str) -> str:
    header, body = header_and_body(text)
    lines = [line for line in body.splitlines() if line.strip()]
    return header + NOTE.format("") + "\n" + "\n".join(lines) + "\n"


def trim(text: str, message: str, imports: list[str], keep) -> str:
    """`message` with only the fields and oneofs of `keep`, one statement a
    line; every other top-level declaration and nested type left out."""
    header, body = header_and_body(text)
    out, depth, skip = [], 0, 0
    for stmt in re.findall(r"[^;{}]*[;{}]", body):
        s = " ".join(stmt.split())
        if skip:
            skip += s.endswith("{") - s.endswith("}")
            continue
        if s in (";", ""):
            continue
        if s == "}":
            depth -= 1
            out.append("  " * depth + s)
            continue
        name = re.search(r"(\w+)\s*=\s*\d+", s)
        opens = s.endswith("{")
        word = s.split()[0]
        if depth == 0:
            if word == "import":
                ok = s.split('"')[1] in imports
            else:
                ok = word in ("syntax", "package") or s == f"message {message} {{"
        elif opens:
            ok = word == "oneof" and (keep is None or s.split()[1] in keep)
        elif word in ("reserved", "extensions", "option"):
            ok = False
        else:
            ok = name is not None and (keep is None or name.group(1) in keep)
        if ok:
            out.append("  " * depth + s)
            depth += opens
        elif opens:
            skip = 1
    return header + NOTE.format(", fields trimmed") + "\n" + "\n".join(out) + "\n"


def main() -> None:
    upstream = pathlib.Path(sys.argv[1])
    here = pathlib.Path(__file__).parent
    files = {rel: strip((upstream / rel).read_text()) for rel in LEAVES}
    for rel, (message, imports, keep) in CONTAINERS.items():
        files[rel] = trim((upstream / rel).read_text(), message, imports, keep)
    for rel, text in files.items():
        out = here / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


if __name__ == "__main__":
    main()
