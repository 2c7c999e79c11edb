"""Reads an export's Parquet tables with DuckDB and polars (tests/export.rs).

stdin: {"dir": EXPORT_DIR, "samples": [[FILE, ROW, COLUMN], ...]}
stdout: {"duckdb": {...}, "polars": {...}, "values": [VALUE, ...]}, where
duckdb and polars each give the rows of every table, the records per pid
(the record's pid: `common_pid` in a table whose event has a field `pid`)
and the query of docs/src/elsewhere.md, and values the sampled field
values (read with polars; a missing column gives {"missing": COLUMN}).
"""

import json
import os
import sys

import duckdb
import polars as pl

# The queries of docs/src/elsewhere.md, run as the chapter shows them (in
# the export's folder, named `out`).
SWITCH_COMMS_SQL = "SELECT comm, count(*) AS switches FROM 'out/sched_switch.parquet' GROUP BY comm ORDER BY switches DESC"
NEXT_COMMS_POLARS = 'pl.read_parquet("out/sched_switch.parquet").group_by("next_comm").len().sort("len", descending=True)'

args = json.load(sys.stdin)
os.chdir(os.path.dirname(os.path.abspath(args["dir"])))
assert os.path.basename(args["dir"]) == "out", "the export's folder is named out"
meta = json.load(open("out/meta.json"))
files = [e["file"] for e in meta["events"]]


def pid_column(columns):
    return "common_pid" if "common_pid" in columns else "pid"


con = duckdb.connect()
d_rows, d_pids = {}, {}
for f in files:
    path = f"out/{f}"
    d_rows[f] = con.execute(f"SELECT count(*) FROM '{path}'").fetchone()[0]
    cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM '{path}'").fetchall()]
    col = pid_column(cols)
    for pid, n in con.execute(f'SELECT "{col}", count(*) FROM \'{path}\' GROUP BY 1').fetchall():
        d_pids[str(pid)] = d_pids.get(str(pid), 0) + n
switch_comms = {c if c is not None else None: n for c, n in con.execute(SWITCH_COMMS_SQL).fetchall()}

p_rows, p_pids = {}, {}
frames = {}
for f in files:
    df = pl.read_parquet(f"out/{f}")
    frames[f] = df
    p_rows[f] = df.height
    col = pid_column(df.columns)
    for pid, n in df.group_by(col).len().iter_rows():
        p_pids[str(pid)] = p_pids.get(str(pid), 0) + n
next_comms = {c: n for c, n in eval(NEXT_COMMS_POLARS).iter_rows()}

values = []
for f, row, col in args["samples"]:
    df = frames[f]
    values.append(df[col][row] if col in df.columns else {"missing": col})

json.dump(
    {
        "duckdb": {"rows": d_rows, "pids": d_pids, "switch_comms": switch_comms},
        "polars": {"rows": p_rows, "pids": p_pids, "next_comms": next_comms},
        "values": values,
    },
    sys.stdout,
)
