//! `relay`: the command line. Parses flags (`args`), runs one command
//! against the library (`commands`), prints text or JSON lines (`output`).

mod args;
mod commands;
mod demo;
mod exec;
mod output;
mod serve;
mod target;
mod work;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("relay: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
