//! `relay-bench`: what Relay's durability costs, measured.
//!
//! One run: a new database, N jobs submitted from `workers x concurrency`
//! threads (one job per call), then leased and acked from as many threads,
//! every transition durably committed; every job must end SUCCEEDED or the
//! run fails. Throughput is also reported as a multiple of the disk's fsync
//! floor, measured in the same run: that ratio is what compares across
//! machines. See docs/BENCHMARKS.md.

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod args;
mod floor;
mod group_commit;
mod matrix;
mod report;
mod run;
mod stats;
mod textbook;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = args::Args::parse();
    let result = if args.lease_ack_child {
        run::lease_ack_child(&args)
    } else if args.matrix {
        matrix::run(&args)
    } else {
        run::single(&args)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("relay-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
