//! One integration-test binary (see Cargo.toml `autotests = false`).

mod common;

mod analyses;
mod answers;
mod bounds;

mod bundle;
mod capture;
mod check;
mod collect;
mod compose;
mod diff;
mod docs;
mod expect;
mod export;
mod facts;
mod faults;
mod fleet;
mod hostile;
mod lab;
mod perftools;
mod plan_export;
mod probes;
mod reliability;
mod report;
mod report_filter;
mod run;
mod runbook;
mod scope;
mod status;
mod teams;
mod teardown;
mod terminal;
mod trust;
mod writer;
