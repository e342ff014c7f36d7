//! The overview's throughput chart: an SVG drawn on the server (no script,
//! no inline style: colours come from the stylesheet's classes).

use maud::{html, Markup};
use relay::{Throughput, Timestamp};
use std::fmt::Write as _;

const MINUTES: usize = 60;
const W: f64 = 720.0;
const H: f64 = 160.0;
const PAD: f64 = 28.0;

/// Per minute from `since` (a minute's start) for an hour: submitted,
/// succeeded, failed, summed over queues.
pub(crate) fn buckets(rows: &[Throughput], since: Timestamp) -> [[u64; 3]; MINUTES] {
    let mut b = [[0u64; 3]; MINUTES];
    for r in rows {
        let i = (r.minute.as_millis() - since.as_millis()).div_euclid(60_000);
        if let Some(slot) = usize::try_from(i).ok().and_then(|i| b.get_mut(i)) {
            slot[0] += r.submitted;
            slot[1] += r.succeeded;
            slot[2] += r.failed;
        }
    }
    b
}

pub(crate) fn chart(rows: &[Throughput], since: Timestamp) -> Markup {
    let b = buckets(rows, since);
    let max = b.iter().flatten().copied().max().unwrap_or(0).max(1);
    let x = |i: usize| PAD + (W - PAD - 4.0) * i as f64 / (MINUTES - 1) as f64;
    let y = |v: u64| H - 18.0 - (H - 28.0) * v as f64 / max as f64;
    let line = |series: usize| {
        let mut pts = String::new();
        for (i, m) in b.iter().enumerate() {
            let _ = write!(pts, "{:.1},{:.1} ", x(i), y(m[series]));
        }
        pts
    };
    let totals: [u64; 3] = [0, 1, 2].map(|s| b.iter().map(|m| m[s]).sum());
    let names = ["submitted", "succeeded", "failed"];
    html! {
        figure.chart {
            svg viewBox={ "0 0 " (W) " " (H) } role="img" aria-label="Jobs per minute over the last hour" {
                line.axis x1=(PAD) y1=(H - 18.0) x2=(W - 4.0) y2=(H - 18.0) {}
                line.grid x1=(PAD) y1=(y(max)) x2=(W - 4.0) y2=(y(max)) {}
                text.label x="2" y=(y(max) + 4.0) { (max) }
                text.label x="2" y=(H - 14.0) { "0" }
                text.label x=(PAD) y=(H - 2.0) { "60 min ago" }
                text.label x=(W - 40.0) y=(H - 2.0) { "now" }
                @for (s, name) in names.iter().enumerate() {
                    polyline class={ "series " (name) } points=(line(s)) {}
                }
            }
            figcaption {
                @for (s, name) in names.iter().enumerate() {
                    span class={ "key " (name) } data-series=(name) { (name) ": " span.n { (totals[s]) } }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_land_in_their_minute_summed_over_queues() {
        let since = Timestamp::from_millis(60_000 * 1000);
        let row = |m: i64, q: &str, n: u64| Throughput {
            minute: Timestamp::from_millis(60_000 * m),
            queue: q.into(),
            submitted: n,
            succeeded: 2 * n,
            failed: 0,
            dead: 0,
        };
        let b = buckets(
            &[
                row(1000, "a", 1),
                row(1000, "b", 2),
                row(1059, "a", 5),
                row(1060, "a", 9),
                row(999, "a", 9),
            ],
            since,
        );
        assert_eq!(b[0], [3, 6, 0]);
        assert_eq!(b[59], [5, 10, 0]);
        assert_eq!(
            b.iter().map(|m| m[0]).sum::<u64>(),
            8,
            "rows outside the hour are left out"
        );
    }
}
