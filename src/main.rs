//! `trace-recipe`: see the library docs. Only this function exits the process.

fn main() {
    std::process::exit(trace_recipe::cli::main(std::env::args_os()));
}
