#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: trace-recipe developers
# MIT OR Apache-2.0
"""Ansible module driving the trace-recipe binary on one host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: trace_recipe
short_description: Gather ftrace facts, check a recipe offline, run it, or read tracefs status with trace-recipe
version_added: "0.1.0"
description:
  - Calls the C(trace-recipe) binary and returns its JSON.
  - C(facts) writes the kernel's ftrace facts to a file (read-only; never changed).
  - C(check) validates a recipe against a fact file offline (C(trace-recipe check --facts));
    run it on the controller (C(delegate_to=localhost)), one fact file per host.
  - C(files) lists a recipe and every file it C(extends), to copy them to a host.
  - C(run) runs a recipe and packs its output folder into a bundle
    (C(trace-recipe run --bundle --format json)); the run's guard rolls tracefs back however it ends.
  - C(status) says whether a trace-recipe run left anything behind in tracefs (never changed).
options:
  command:
    description: What to do.
    type: str
    required: true
    choices: [facts, check, files, run, status]
  binary:
    description: The trace-recipe binary on the host where the module runs.
    type: path
    default: trace-recipe
  recipe:
    description: The recipe file (C(check), C(files), C(run)).
    type: path
  facts:
    description: The fact file to write (C(facts)) or to validate against (C(check)).
    type: path
  output:
    description: The run's output folder (C(run)); the bundle is OUTPUT.tar.zst. Both are replaced.
    type: path
  duration:
    description: Replaces the recipe's C(duration) (C(run)), e.g. C(10s).
    type: str
  sets:
    description: C([params]) overrides, C(KEY=VALUE) (C(check), C(run)).
    type: list
    elements: str
    default: []
author:
  - trace-recipe developers
"""

EXAMPLES = r"""
- name: Gather this host's ftrace facts
  trace_recipe.fleet.trace_recipe:
    command: facts
    facts: /var/tmp/trace-recipe/facts.json

- name: Check the recipe against a host's facts on the controller
  trace_recipe.fleet.trace_recipe:
    command: check
    binary: trace-recipe
    facts: "fleet/facts/{{ inventory_hostname }}.json"
    recipe: recipes/exec-tree.toml
  delegate_to: localhost

- name: Run it, writing a bundle
  trace_recipe.fleet.trace_recipe:
    command: run
    recipe: /var/tmp/trace-recipe/recipe/exec-tree.toml
    output: /var/tmp/trace-recipe/out
    duration: 10s
"""

RETURN = r"""
rc:
  description: Exit code of trace-recipe (negative -N when killed by signal N).
  returned: always
  type: int
json:
  description: The JSON trace-recipe printed (C(check), C(run), C(status)); C(null) when none.
  returned: always
  type: dict
ok:
  description: C(check) only. Whether the recipe is valid for the facts' kernel.
  returned: when command is check
  type: bool
first_problem:
  description: C(check) only. The first diagnostic as C(LINE:COL message), or C(null).
  returned: when command is check
  type: str
files:
  description: C(files) only. The recipe and every file it extends, as C(src) (absolute) and C(dest) (relative).
  returned: when command is files
  type: list
  elements: dict
recipe_dest:
  description: C(files) only. The recipe's path relative to the copied folder.
  returned: when command is files
  type: str
bundle:
  description: C(run) only. The bundle written, when there is one.
  returned: when command is run
  type: str
host_status:
  description: C(run) only, when the run wrote no bundle. C(stage), C(reason), C(exit_code) for C(trace-recipe fleet).
  returned: when a run failed
  type: dict
release:
  description: C(facts) only. The kernel release the facts describe.
  returned: when command is facts
  type: str
left_behind:
  description: C(status) only. Whether a dead trace-recipe run left something in tracefs.
  returned: when command is status
  type: bool
"""

import json
import os
import shutil
import signal

from ansible.module_utils.basic import AnsibleModule

try:
    import tomllib
except ImportError:  # Python < 3.11 on the controller
    tomllib = None


def parse_json(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def extends_closure(module, recipe):
    """The recipe and every file it extends, following `extends` chains."""
    if tomllib is None:
        module.fail_json(msg="command=files needs Python >= 3.11 (tomllib) on the controller")
    seen = []
    path = os.path.abspath(recipe)
    while path is not None:
        if path in seen:
            module.fail_json(msg="%s: `extends` loops back to %s" % (recipe, path))
        seen.append(path)
        try:
            with open(path, "rb") as f:
                data = tomllib.load(f)
        except (OSError, ValueError) as e:
            module.fail_json(msg="cannot read recipe %s: %s" % (path, e))
        base = data.get("extends")
        path = os.path.normpath(os.path.join(os.path.dirname(path), base)) if base else None
    root = os.path.commonpath([os.path.dirname(p) for p in seen])
    files = [{"src": p, "dest": os.path.relpath(p, root)} for p in seen]
    return files, files[0]["dest"]


def run_failure(rc, out, err):
    """What a host status file says about a run that wrote no bundle."""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "signal %d" % -rc
        return {
            "stage": "run",
            "reason": "trace-recipe run was killed by %s (its guard rolls tracefs back)" % name,
            "exit_code": 128 - rc,
        }
    reason = (out or {}).get("error") if isinstance(out, dict) else None
    if not reason:
        lines = [line for line in err.splitlines() if line.strip()]
        reason = lines[-1] if lines else "trace-recipe run exited %d" % rc
    return {"stage": "run", "reason": reason, "exit_code": rc}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            command=dict(type="str", required=True, choices=["facts", "check", "files", "run", "status"]),
            binary=dict(type="path", default="trace-recipe"),
            recipe=dict(type="path"),
            facts=dict(type="path"),
            output=dict(type="path"),
            duration=dict(type="str"),
            sets=dict(type="list", elements="str", default=[]),
        ),
        required_if=[
            ("command", "facts", ["facts"]),
            ("command", "check", ["facts", "recipe"]),
            ("command", "files", ["recipe"]),
            ("command", "run", ["recipe", "output"]),
        ],
        supports_check_mode=True,
    )
    p = module.params
    cmd = p["command"]
    binary = p["binary"]
    sets = [a for s in p["sets"] for a in ("--set", s)]

    if cmd == "files":
        files, dest = extends_closure(module, p["recipe"])
        module.exit_json(changed=False, rc=0, json=None, files=files, recipe_dest=dest)

    if cmd == "facts":
        rc, out, err = module.run_command([binary, "facts", "-o", p["facts"]])
        if rc != 0:
            module.fail_json(msg="trace-recipe facts failed: %s" % err.strip(), rc=rc, json=None)
        try:
            with open(p["facts"]) as f:
                release = json.load(f).get("release")
        except (OSError, ValueError):
            release = None
        module.exit_json(changed=False, rc=rc, json=None, facts=p["facts"], release=release)

    if cmd == "check":
        argv = [binary, "check", "--facts", p["facts"], p["recipe"], "--format", "json"] + sets
        rc, out, err = module.run_command(argv)
        doc = parse_json(out)
        if doc is None or rc not in (0, 1):
            module.fail_json(msg="trace-recipe check failed: %s" % err.strip(), rc=rc, json=doc)
        first = None
        if doc["diagnostics"]:
            d = doc["diagnostics"][0]
            where = "%s:%s" % (d.get("line") or "-", d.get("column") or "-")
            first = "%s %s" % (where, d["message"])
        # An invalid recipe (exit 1) is a verdict, not a module failure.
        module.exit_json(changed=False, failed=False, rc=rc, json=doc, ok=doc["ok"], first_problem=first)

    if cmd == "status":
        rc, out, err = module.run_command([binary, "status", "--format", "json"])
        doc = parse_json(out)
        if doc is None:
            # Say what came back when the binary printed no error (a signal,
            # an exit code, the start of what it printed instead of JSON).
            why = err.strip() or "exit %s, nothing on stderr, %d bytes on stdout%s" % (
                rc if rc >= 0 else "by signal %d" % -rc,
                len(out),
                (": %r" % out[:200]) if out else "",
            )
            module.fail_json(msg="trace-recipe status failed: %s" % why, rc=rc, json=None)
        module.exit_json(changed=False, failed=False, rc=rc, json=doc, left_behind=doc["left_behind"])

    # run
    if module.check_mode:
        module.exit_json(changed=True, rc=0, json=None, msg="check mode: nothing is traced")
    output = p["output"]
    bundle = output + ".tar.zst"
    if os.path.isdir(output):
        shutil.rmtree(output)
    if os.path.exists(bundle):
        os.unlink(bundle)
    argv = [binary, "run", p["recipe"], "--bundle", "-o", output, "--format", "json", "-q"] + sets
    if p["duration"]:
        argv += ["--duration", p["duration"]]
    rc, out, err = module.run_command(argv)
    doc = parse_json(out)
    if os.path.isfile(bundle):
        # 4 (lost events over the limit) and 5 (an expectation failed) still wrote everything:
        # the fleet summary shows them; other codes fail the host.
        module.exit_json(changed=True, rc=rc, json=doc, bundle=bundle, failed=rc not in (0, 4, 5), stderr=err)
    module.fail_json(
        msg="trace-recipe run wrote no bundle (exit %d): %s" % (rc, err.strip()),
        changed=True,
        rc=rc,
        json=doc,
        host_status=run_failure(rc, doc, err),
    )


if __name__ == "__main__":
    main()
