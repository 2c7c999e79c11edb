//! Any bytes as a trace.dat: open, iterate every record, format it, count it.
//! Must end in Ok or Err, never a panic, with bounded memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = tracedat::TraceFile::from_bytes(data.to_vec()) else { return };
    let mut sink = std::io::sink();
    for (i, rec) in file.records().enumerate() {
        let Ok(rec) = rec else { break };
        let _ = tracedat::format_record(&file, &rec, &mut sink);
        if i > 1_000_000 {
            break;
        }
    }
    let _ = trace_recipe::analysis::analyze(&file, &trace_recipe::analysis::Selection::new(&file, &[]));
});
