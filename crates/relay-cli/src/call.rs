//! `relay call OPERATION [PARAM] [--query NAME=VALUE]... [--body JSON]`:
//! any call of the API's table by its operation name (as `/openapi.json`
//! names it), on a database file or a server alike; prints its answer as
//! JSON (payloads as stored). A call added to the table is here with no
//! change to the CLI.

use crate::args::CallArgs;
use crate::error::CliError;
use crate::target::Target;
use relay_client::wire::{self, calls, Call, Part, PathParam};
use relay_server::Answered;
use std::io::Read;

/// The call's method, when `operation` names one (a read does not create
/// a database).
pub fn method(operation: &str) -> Option<wire::Method> {
    wire::CALLS.iter().find(|c| c.operation == operation).map(|c| c.method)
}

macro_rules! by_name {
    ($($call:ident),*) => {
        /// Runs the call named `a.operation`; its answer's JSON text.
        pub fn run(t: &Target, a: CallArgs) -> Result<String, CliError> {
            $(if a.operation == <calls::$call as Call>::OPERATION {
                return one::<calls::$call>(t, a);
            })*
            let known: Vec<String> = wire::CALLS
                .iter()
                .map(|c| format!("  {:<15} {} {}", c.operation, c.method.as_str(), c.path))
                .collect();
            Err(CliError::Usage(format!(
                "no call named {:?}; the API's calls:\n{}",
                a.operation,
                known.join("\n")
            )))
        }
    };
}
relay_client::for_each_call!(by_name);

fn one<C: Answered>(t: &Target, a: CallArgs) -> Result<String, CliError>
where
    C::Param: Clone,
{
    let usage = |m: String| CliError::Usage(format!("relay call {}: {m}", C::OPERATION));
    let param = match (C::param_name(), a.param) {
        (Some(n), None) => return Err(usage(format!("give its {n} ({} {})", C::METHOD.as_str(), C::PATH))),
        (None, Some(p)) => return Err(usage(format!("it takes no {p:?} ({} {})", C::METHOD.as_str(), C::PATH))),
        (_, p) => C::Param::parse(p).map_err(usage)?,
    };
    let query: C::Query = if <C::Query as Part>::GIVEN {
        let pairs: Vec<(&str, &str)> = a
            .query
            .iter()
            .map(|q| {
                q.split_once('=')
                    .ok_or_else(|| usage(format!("--query {q:?} is not NAME=VALUE")))
            })
            .collect::<Result<_, _>>()?;
        let text = serde_urlencoded::to_string(&pairs).map_err(|e| usage(e.to_string()))?;
        serde_urlencoded::from_str(&text).map_err(|e| usage(format!("bad query: {e}")))?
    } else if !a.query.is_empty() {
        return Err(usage("it takes no query".into()));
    } else {
        nothing()?
    };
    let body: C::Body = if <C::Body as Part>::GIVEN {
        let text = match a.body.as_deref() {
            None => {
                return Err(usage(
                    "give its body as JSON: --body '{...}' (or --body - to read it from stdin)".into(),
                ))
            }
            Some("-") => {
                // No further than a server would read: `< /dev/zero` must
                // not fill memory.
                let mut s = String::new();
                std::io::stdin()
                    .take(MAX_BODY + 1)
                    .read_to_string(&mut s)
                    .map_err(|e| CliError::Io(format!("reading the body from stdin: {e}")))?;
                if s.len() as u64 > MAX_BODY {
                    return Err(usage(format!("the body on stdin is over {MAX_BODY} bytes")));
                }
                s
            }
            Some(t) => t.to_owned(),
        };
        if let Some(why) = <C::Body as Part>::refuse(&text) {
            return Err(usage(why));
        }
        serde_json::from_str(&text).map_err(|e| usage(format!("the body is not valid for this call: {e}")))?
    } else if a.body.is_some() {
        return Err(usage("it takes no body".into()));
    } else {
        nothing()?
    };
    let answer = t.send::<C>(&param, &query, &body)?;
    // As serialized, never parsed again: a payload a `Value` cannot hold
    // (`1e999`) prints as stored, and a lease already taken is not lost to
    // a printing error.
    serde_json::to_string(&answer).map_err(|e| CliError::Io(format!("an answer that does not serialize: {e}")))
}

/// The largest body `relay call` reads from stdin: a server's default
/// limit (`relay serve --max-body`).
const MAX_BODY: u64 = 2 << 20;

/// The query or body of a call that takes none.
fn nothing<T: serde::de::DeserializeOwned>() -> Result<T, CliError> {
    serde_json::from_str("{}").map_err(|e| CliError::Io(format!("a call's empty part: {e}")))
}
