//! Compiles Perfetto's trace protocol (proto/perfetto: the vendored `.proto`
//! files, its README says which release) into Rust types for
//! `export --format perfetto` (src/export/perfetto.rs), with `protox` (a
//! protobuf compiler in Rust: no `protoc` to install) and `prost-build`.

fn main() {
    let root = "proto/perfetto";
    println!("cargo:rerun-if-changed={root}/protos");
    let files = protox::compile(["protos/perfetto/trace/trace.proto"], [root])
        .unwrap_or_else(|e| panic!("{root}: {e}"));
    prost_build::Config::new()
        .compile_fds(files)
        .unwrap_or_else(|e| panic!("{root}: {e}"));
}
