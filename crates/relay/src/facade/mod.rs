//! Each call of the engine's two facades written once: [`Relay`]'s
//! blocking method, with its doc, and [`AsyncRelay`]'s future, from one
//! definition (`facade!`). A write builds its operation (`Pending`) and
//! runs it on the writer (`Engine::run`, `Engine::run_async`); a read runs
//! on the caller's thread, or, async, on the blocking pool with its
//! arguments owned (`Arg`, `Lend`). Calls whose two forms differ by nature
//! (`lease`'s wait, `submit_in_pg`'s client) are written in `relay.rs` and
//! `async_relay.rs`.

use relay_core::read::JobFilter;
use relay_core::{JobId, Timestamp};

/// An argument of a read as the async facade moves it to the blocking
/// pool: owned.
pub(crate) trait Arg {
    /// The owned form.
    type Owned: Send + 'static;
    fn own(self) -> Self::Owned;
}

/// An owned argument lent back to the read in the form its blocking twin
/// takes.
pub(crate) trait Lend<'a> {
    /// The borrowed form.
    type Out;
    fn lend(&'a self) -> Self::Out;
}

macro_rules! by_value {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            type Owned = $t;
            fn own(self) -> $t {
                self
            }
        }
        impl Lend<'_> for $t {
            type Out = $t;
            fn lend(&self) -> $t {
                *self
            }
        }
    )*};
}
by_value!(JobId, u32, i64, usize, Timestamp);

impl Arg for &JobFilter {
    type Owned = JobFilter;
    fn own(self) -> JobFilter {
        self.clone()
    }
}

impl<'a> Lend<'a> for JobFilter {
    type Out = &'a JobFilter;
    fn lend(&'a self) -> &'a JobFilter {
        self
    }
}

impl Arg for &str {
    type Owned = String;
    fn own(self) -> String {
        self.to_owned()
    }
}

impl<'a> Lend<'a> for String {
    type Out = &'a str;
    fn lend(&'a self) -> &'a str {
        self
    }
}

impl Arg for Option<&str> {
    type Owned = Option<String>;
    fn own(self) -> Option<String> {
        self.map(str::to_owned)
    }
}

impl<'a> Lend<'a> for Option<String> {
    type Out = Option<&'a str>;
    fn lend(&'a self) -> Option<&'a str> {
        self.as_deref()
    }
}

/// Defines each call once: `write fn` runs an operation on the writer
/// (`then` maps its answer), `read fn` reads.
macro_rules! facade {
    ($(
        $(#[$attr:meta])*
        $kind:ident fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty = |$e:ident| $body:expr $(, then |$done:ident| $post:expr)?;
    )*) => {
        impl Relay {$(
            $(#[$attr])*
            pub fn $name(&self, $($arg: $ty),*) -> $ret {
                let $e = &*self.engine;
                facade!(@blocking $kind, $e, $body $(, $done, $post)?)
            }
        )*}

        impl AsyncRelay {$(
            #[doc = concat!("[`Relay::", stringify!($name), "`], as a future.")]
            ///
            /// # Errors
            ///
            #[doc = concat!("As [`Relay::", stringify!($name), "`].")]
            pub async fn $name(&self, $($arg: $ty),*) -> $ret {
                facade!(@async $kind, self, $e, ($($arg),*), $body $(, $done, $post)?)
            }
        )*}
    };
    (@blocking write, $e:ident, $body:expr) => { $e.run($body) };
    (@blocking write, $e:ident, $body:expr, $done:ident, $post:expr) => {{
        let $done = $e.run($body)?;
        $post
    }};
    (@blocking read, $e:ident, $body:expr) => { $body };
    (@async write, $s:ident, $e:ident, ($($arg:ident),*), $body:expr) => {{
        let $e = &*$s.engine;
        $e.run_async($body).await
    }};
    (@async write, $s:ident, $e:ident, ($($arg:ident),*), $body:expr, $done:ident, $post:expr) => {{
        let $e = &*$s.engine;
        let $done = $e.run_async($body).await?;
        $post
    }};
    (@async read, $s:ident, $e:ident, ($($arg:ident),*), $body:expr) => {{
        $(let $arg = $crate::facade::Arg::own($arg);)*
        $s.read(move |$e| {
            $(let $arg = $crate::facade::Lend::lend(&$arg);)*
            $body
        })
        .await
    }};
}

mod reads;
mod writes;
