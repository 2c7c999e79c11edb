//! Any bytes as a trace.dat, through the whole report path: open, print every
//! record as text, run every analysis, render the summary, JSON and HTML.
//! Must end in Ok or Err, never a panic, with bounded memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trace_recipe::analysis::{AnalysisName, Selection, analyze};
use trace_recipe::recipe::Template;
use trace_recipe::report::{JsonReport, render_html};

fuzz_target!(|data: &[u8]| {
    let Ok(file) = tracedat::TraceFile::from_bytes(data.to_vec()) else { return };
    let mut sink = std::io::sink();
    let mut printer = tracedat::Printer::new(&file);
    for (i, rec) in file.records().enumerate() {
        let Ok(rec) = rec else { break };
        let _ = printer.write(&rec, &mut sink);
        if i > 1_000_000 {
            break;
        }
    }
    let _ = printer.finish(&mut sink);
    let Ok(a) = analyze(&file, &Selection::new(&file, &AnalysisName::ALL)) else { return };
    let r = JsonReport::new(&file, &a, None);
    let _ = serde_json::to_string(&r);
    let _ = render_html(&r);
    let _ = Template::builtin().render(&r);
});
