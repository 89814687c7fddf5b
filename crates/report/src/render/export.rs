//! One exporter interface for the reports written whole, at the end:
//! `compare`, `--repeat`, `msg` and `qualify`. Each implements
//! [`Document`] (its human table and its CSV; JSON is its serde form) and
//! every command writes it through [`export`], so a format behaves the
//! same for every report kind: `--json` is the pretty document, JSON Lines
//! one compact line. Tests and sweeps stream their records as they happen
//! through [`super::Sink`] and [`super::SweepSink`], whose JSON ends with
//! the same [`super::json::document`].

use std::io::{self, Write};

use super::format::Format;

/// A report written whole, in any [`Format`].
pub trait Document: serde::Serialize {
    /// The table a person reads.
    fn human(&self, out: &mut dyn Write) -> io::Result<()>;

    /// The CSV form; a kind without one says so (its command offers no
    /// `--csv`).
    fn csv(&self, _out: &mut dyn Write) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this report has no CSV form (use --json)",
        ))
    }

    /// The JSON Lines record that carries the whole report: the report
    /// itself, on one line, unless the kind wraps it in a tagged record
    /// (`--repeat`'s summary follows its trial records).
    fn json_line(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer(&mut *out, self)?;
        writeln!(out)
    }
}

/// Writes `doc` in `format`.
pub fn export<D: Document>(doc: &D, format: Format, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Human => doc.human(out),
        Format::Json => super::json::document(out, doc),
        Format::JsonLines => doc.json_line(out),
        Format::Csv => doc.csv(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Plain {
        figure: u32,
    }

    impl Document for Plain {
        fn human(&self, out: &mut dyn Write) -> io::Result<()> {
            writeln!(out, "figure {}", self.figure)
        }
    }

    fn written(format: Format) -> io::Result<String> {
        let mut buf = Vec::new();
        export(&Plain { figure: 7 }, format, &mut buf)?;
        Ok(String::from_utf8(buf).expect("utf-8"))
    }

    #[test]
    fn every_format_of_a_document_goes_through_one_function() {
        assert_eq!(written(Format::Human).expect("human"), "figure 7\n");
        assert_eq!(
            written(Format::Json).expect("json"),
            "{\n  \"figure\": 7\n}\n"
        );
        assert_eq!(
            written(Format::JsonLines).expect("json lines"),
            "{\"figure\":7}\n"
        );
        let csv = written(Format::Csv).expect_err("no csv");
        assert_eq!(csv.kind(), io::ErrorKind::Unsupported);
    }
}
