//! The microbenchmark harness: turns divan's table into JSON (benchmark
//! name -> median ns) and compares a run against the committed baseline.
//!
//! - `microbench parse < divan-output.txt > bench/results/latest.json`
//! - `microbench check --baseline bench/baselines/main.json --latest bench/results/latest.json [--threshold 10] [--soft]`
//!
//! `scripts/microbench` runs the whole loop; see docs/BENCHMARKS.md.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::ExitCode;

type Results = BTreeMap<String, f64>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("parse") => parse_stdin(),
        Some("check") => check(&args[1..]),
        _ => Err("usage: microbench parse < divan.txt > latest.json | microbench check --baseline B --latest L [--threshold PCT] [--soft]".into()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("microbench: {e}");
            ExitCode::from(2)
        }
    }
}

fn parse_stdin() -> Result<ExitCode, String> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| format!("reading stdin: {e}"))?;
    let results = parse(&text);
    if results.is_empty() {
        return Err("no benchmark results found in the input (expected divan's table)".into());
    }
    println!("{}", serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?);
    Ok(ExitCode::SUCCESS)
}

/// Reads divan's tree table: the median column of every leaf, keyed by its
/// path (`module/bench`, with `/arg` for parameterized benchmarks).
fn parse(text: &str) -> Results {
    let mut stack: Vec<String> = Vec::new();
    let mut out = Results::new();
    for line in text.lines() {
        // The tree prefix (`│  ├─ `) is three characters a level.
        let prefix = line
            .chars()
            .take_while(|c| matches!(c, '│' | '├' | '╰' | '─' | ' '))
            .count();
        let rest: String = line.chars().skip(prefix).collect();
        // A table row: name and fastest, then slowest, median, mean, samples, iters.
        let cols: Vec<&str> = rest.split('│').collect();
        let Some(name) = cols[0].split_whitespace().next() else {
            continue;
        };
        if cols.len() < 6 || name == "Timer" {
            continue;
        }
        stack.truncate(prefix / 3);
        stack.push(name.to_owned());
        if let Some(ns) = to_ns(cols[2]) {
            // Skip the root (the bench binary's name) in the key.
            let key = stack.iter().skip(1).cloned().collect::<Vec<_>>().join("/");
            out.insert(if key.is_empty() { name.to_owned() } else { key }, ns);
        }
    }
    out
}

fn to_ns(cell: &str) -> Option<f64> {
    let mut parts = cell.split_whitespace();
    let value: f64 = parts.next()?.parse().ok()?;
    let scale = match parts.next()? {
        "ps" => 1e-3,
        "ns" => 1.0,
        "µs" | "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    Some(value * scale)
}

fn read(path: &str) -> Result<Results, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{path} is not a results file: {e}"))
}

fn check(args: &[String]) -> Result<ExitCode, String> {
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let baseline_path = flag("--baseline").ok_or("--baseline PATH is required")?;
    let latest_path = flag("--latest").ok_or("--latest PATH is required")?;
    let threshold: f64 =
        flag("--threshold").map_or(Ok(10.0), |t| t.parse().map_err(|_| format!("bad --threshold {t}")))?;
    let soft = args.iter().any(|a| a == "--soft");
    let (table, regressions) = compare(&read(&baseline_path)?, &read(&latest_path)?, threshold);
    println!("{table}");
    if regressions == 0 {
        println!("no benchmark regressed by more than {threshold}%");
        return Ok(ExitCode::SUCCESS);
    }
    println!("{regressions} benchmark(s) regressed by more than {threshold}%");
    if soft {
        println!("(soft mode: reported, not failed; machines are noisy)");
        return Ok(ExitCode::SUCCESS);
    }
    Ok(ExitCode::FAILURE)
}

/// The markdown table and the number of regressions past `threshold` percent.
fn compare(baseline: &Results, latest: &Results, threshold: f64) -> (String, usize) {
    let mut rows = vec![
        "| benchmark | baseline | current | change | verdict |".to_owned(),
        "|---|---:|---:|---:|---|".to_owned(),
    ];
    let mut regressions = 0;
    let names: std::collections::BTreeSet<&String> = baseline.keys().chain(latest.keys()).collect();
    for name in names {
        let row = match (baseline.get(name), latest.get(name)) {
            (Some(b), Some(c)) => {
                let change = (c - b) / b * 100.0;
                let verdict = if change > threshold {
                    regressions += 1;
                    "REGRESSED"
                } else if change < -threshold {
                    "faster"
                } else {
                    "same"
                };
                format!(
                    "| {name} | {} | {} | {change:+.1}% | {verdict} |",
                    fmt_ns(*b),
                    fmt_ns(*c)
                )
            }
            (Some(b), None) => format!("| {name} | {} | - | - | gone |", fmt_ns(*b)),
            (None, Some(c)) => format!("| {name} | - | {} | - | new |", fmt_ns(*c)),
            (None, None) => continue,
        };
        rows.push(row);
    }
    (rows.join("\n"), regressions)
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIVAN: &str = "\
micro                              fastest       │ slowest       │ median        │ mean          │ samples │ iters
├─ core                                          │               │               │               │         │
│  ├─ choose_among_four            2.1 ns        │ 10.5 ns       │ 2.25 ns       │ 2.3 ns        │ 100     │ 409600
│  ╰─ transition_ack               30 ns         │ 60 ns         │ 31 ns         │ 32 ns         │ 100     │ 25600
╰─ store                                         │               │               │               │         │
   ╰─ claim_and_release_in_memory  40.1 µs       │ 1.2 ms        │ 52.5 µs       │ 60 µs         │ 200     │ 200
";

    #[test]
    fn parses_divan_tree_to_median_ns() {
        let r = parse(DIVAN);
        assert_eq!(r.len(), 3, "{r:?}");
        assert_eq!(r["core/choose_among_four"], 2.25);
        assert_eq!(r["core/transition_ack"], 31.0);
        assert_eq!(r["store/claim_and_release_in_memory"], 52_500.0);
    }

    #[test]
    fn compare_flags_regressions_past_threshold() {
        let base: Results = [
            ("a".into(), 100.0),
            ("b".into(), 100.0),
            ("c".into(), 100.0),
            ("old".into(), 5.0),
        ]
        .into();
        let cur: Results = [
            ("a".into(), 109.0),
            ("b".into(), 125.0),
            ("c".into(), 50.0),
            ("new".into(), 7.0),
        ]
        .into();
        let (table, n) = compare(&base, &cur, 10.0);
        assert_eq!(n, 1);
        assert!(
            table.contains("| b | 100.0 ns | 125.0 ns | +25.0% | REGRESSED |"),
            "{table}"
        );
        assert!(table.contains("| a | 100.0 ns | 109.0 ns | +9.0% | same |"));
        assert!(table.contains("| c | 100.0 ns | 50.0 ns | -50.0% | faster |"));
        assert!(table.contains("| old | 5.0 ns | - | - | gone |") && table.contains("| new | - | 7.0 ns | - | new |"));
    }
}
