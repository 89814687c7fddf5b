//! Words and line wrapping the human and CSV formats share: side names and
//! lines kept within the human format's width.

pub(super) fn side_name(s: linerate_proto::wire::Side) -> &'static str {
    match s {
        linerate_proto::wire::Side::Client => "client",
        linerate_proto::wire::Side::Server => "server",
    }
}

/// The widest line the human format writes (issue 13).
pub(super) const WIDTH: usize = 100;

/// `text` as lines of at most [`WIDTH`] columns, each after the first
/// indented by `indent` spaces: broken after a `sep` where it can, else at
/// a space. Ends without a newline.
pub(super) fn wrap(text: &str, sep: &str, indent: usize) -> String {
    let cols = |s: &str| s.chars().count();
    let pad = " ".repeat(indent);
    let mut lines: Vec<String> = vec![String::new()];
    let mut pieces: Vec<String> = Vec::new();
    // Pieces keep their separator, so joining them gives the text back.
    let mut rest = text;
    while let Some(i) = rest.find(sep) {
        pieces.push(rest[..i + sep.len()].to_string());
        rest = &rest[i + sep.len()..];
    }
    pieces.push(rest.to_string());
    for piece in pieces {
        for (k, word) in piece.split(' ').enumerate() {
            let word = if k == 0 {
                word.to_string()
            } else {
                format!(" {word}")
            };
            let line = lines.last_mut().expect("one line at least");
            let fits = cols(line) + cols(&word) <= WIDTH;
            // A new piece starts a new line when it would not fit whole.
            let piece_fits = k > 0 || cols(line) + cols(piece.trim_end()) <= WIDTH;
            if line.trim().is_empty() || (fits && piece_fits) {
                line.push_str(&word);
            } else {
                let trimmed = line.trim_end().to_string();
                *line = trimmed;
                lines.push(format!("{pad}{}", word.trim_start()));
            }
        }
    }
    lines
        .iter()
        .map(|l| l.trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}
