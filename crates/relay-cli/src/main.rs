//! `relay`: the command line. Parses flags (`args`), runs one command
//! against the library (`commands`), prints text or JSON lines (`output`).

mod args;
mod call;
mod commands;
mod demo;
mod error;
mod exec;
mod http_backend;
mod output;
mod serve;
mod target;
mod work;

use std::process::ExitCode;

fn main() -> ExitCode {
    // The engine's and the server's own reports (a failed fsync, a corrupt
    // row passed over, a token sent to a server without auth) on stderr;
    // RELAY_LOG=info (or debug, or a tracing filter) shows more.
    let filter = tracing_subscriber::EnvFilter::try_from_env("RELAY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colours only on a terminal: a log file or a pipe gets plain text.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    let matches = <args::Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <args::Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let cli = match args::one_store(cli, &matches) {
        Ok(cli) => cli,
        Err(message) => {
            eprintln!("relay: {message}");
            return ExitCode::from(2);
        }
    };
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // An error may quote what a worker or a caller wrote.
            eprintln!("relay: {}", output::printable(&e.to_string()));
            ExitCode::from(e.exit_code())
        }
    }
}
