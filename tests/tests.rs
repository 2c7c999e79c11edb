//! One integration-test binary (see Cargo.toml `autotests = false`).

mod common;

mod check;
mod docs;
mod hostile;
mod lab;
mod probes;
mod reliability;
mod report;
mod run;
mod status;
mod teardown;
