//! `run --junit FILE`: the recipe's `[[expect]]` results as JUnit XML, one test
//! case per expectation in a suite named after the recipe, for CI systems that
//! show test results.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::JsonReport;

/// Renders `report.expectations` as JUnit XML. A failed expectation is a
/// `<failure>` whose message gives the measured value.
pub(crate) fn render_junit(report: &JsonReport) -> String {
    let name = report
        .recipe
        .clone()
        .unwrap_or_else(|| "trace-recipe".into());
    let mut suite = TestSuite::new(name.clone());
    for e in &report.expectations {
        let actual = match (&e.actual, &e.missing) {
            (Some(a), _) => a.clone(),
            (None, Some(why)) => format!("unknown ({why})"),
            (None, None) => "unknown".into(),
        };
        let status = if e.passed {
            TestCaseStatus::success()
        } else {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!("expected `{}`, actual {actual}", e.that));
            s
        };
        let mut case = TestCase::new(e.that.clone(), status);
        case.set_system_out(format!("actual: {actual}"));
        suite.add_test_case(case);
    }
    let mut junit = Report::new(format!("trace-recipe {name}"));
    junit.add_test_suite(suite);
    let mut out = Vec::new();
    // Serializing into a Vec cannot fail on I/O; an XML error would be a bug.
    let _ = junit.serialize(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}
