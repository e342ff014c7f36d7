//! [`StoreUrl`]: which store a database target (a path or a URL) names.

use std::path::Path;

/// Where a Relay keeps its jobs, as a path or URL names it: what
/// [`Relay::connect`](crate::Relay::connect) and
/// [`Relay::store_exists`](crate::Relay::store_exists) take.
///
/// A target that starts with `postgres://` or `postgresql://` (exactly so:
/// the scheme is matched case-sensitively) names a PostgreSQL server,
/// whether or not this build can open it (the `postgres` feature); any
/// other target is the path of an SQLite file.
///
/// ```
/// use relay::StoreUrl;
/// use std::path::Path;
///
/// assert_eq!(StoreUrl::parse("jobs.db"), StoreUrl::File(Path::new("jobs.db")));
/// assert_eq!(StoreUrl::parse("postgres://h/db"), StoreUrl::Postgres("postgres://h/db"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreUrl<'a> {
    /// An SQLite file: the target, as a path.
    File(&'a Path),
    /// A PostgreSQL database: the whole URL, `postgres://` or
    /// `postgresql://` included.
    Postgres(&'a str),
}

impl<'a> StoreUrl<'a> {
    /// The store `target` names. Never fails: whatever is not a PostgreSQL
    /// URL is a file path, checked only when it is opened.
    pub fn parse(target: &'a str) -> Self {
        if target.starts_with("postgres://") || target.starts_with("postgresql://") {
            StoreUrl::Postgres(target)
        } else {
            StoreUrl::File(Path::new(target))
        }
    }

    /// True for a PostgreSQL database, false for an SQLite file.
    pub fn is_postgres(&self) -> bool {
        matches!(self, StoreUrl::Postgres(_))
    }
}

#[cfg(test)]
mod tests {
    use super::StoreUrl;
    use std::path::Path;

    #[test]
    fn a_path_is_a_file() {
        assert_eq!(StoreUrl::parse("jobs.db"), StoreUrl::File(Path::new("jobs.db")));
        assert_eq!(
            StoreUrl::parse("/var/lib/relay/jobs.db"),
            StoreUrl::File(Path::new("/var/lib/relay/jobs.db"))
        );
        assert!(!StoreUrl::parse("jobs.db").is_postgres());
    }

    #[test]
    fn both_postgres_schemes_are_postgres() {
        let url = "postgres://relay:secret@localhost:5432/jobs";
        assert_eq!(StoreUrl::parse(url), StoreUrl::Postgres(url));
        let url = "postgresql://localhost/jobs?sslmode=disable";
        assert_eq!(StoreUrl::parse(url), StoreUrl::Postgres(url));
        assert!(StoreUrl::parse(url).is_postgres());
    }

    #[test]
    fn the_scheme_is_case_sensitive() {
        // The rule is the one Relay has always applied: an uppercase scheme is a file name.
        assert_eq!(
            StoreUrl::parse("POSTGRES://h/db"),
            StoreUrl::File(Path::new("POSTGRES://h/db"))
        );
        assert_eq!(
            StoreUrl::parse("PostgreSQL://h/db"),
            StoreUrl::File(Path::new("PostgreSQL://h/db"))
        );
    }

    #[test]
    fn a_path_that_mentions_postgres_is_a_file() {
        for path in [
            "postgres.db",
            "postgres/jobs.db",
            "./postgres://x",
            "data/postgresql://jobs",
            "postgres:/x",
            "",
        ] {
            assert_eq!(StoreUrl::parse(path), StoreUrl::File(Path::new(path)), "{path}");
        }
    }
}
