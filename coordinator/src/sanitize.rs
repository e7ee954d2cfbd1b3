//! What Kairos keeps and serves of the text a feed wrote into a posting.
//!
//! Titles and links come from strangers' documents and reach readers' pages. Kairos treats a
//! title as data, not markup: it is never interpreted, and `<script>` in a title is served as
//! those characters (a client must escape it like any other text; docs/SECURITY.md). What
//! Kairos does guarantee, at ingest and again when serving (postings stored before these
//! rules are served under them too):
//!
//! * titles have no control characters (tabs and line breaks become spaces; C0, DEL and C1
//!   controls, bidirectional overrides and the BOM are removed), surrounding space is
//!   trimmed, and at most [`MAX_TITLE_BYTES`] are kept;
//! * a link is kept only when it is an absolute `http` or `https` URL of at most
//!   [`MAX_LINK_BYTES`] with no whitespace or control characters; `javascript:`, `data:`,
//!   `vbscript:`, `file:`, relative and malformed links are dropped (counted in
//!   `kairos_postings_sanitized_total{what="link"}`).

pub use kairos_proto::bounds::{MAX_LINK_BYTES, MAX_TITLE_BYTES};

/// Characters removed from titles outright (beyond C0/C1 controls and DEL): the bidi
/// embedding, override and isolate controls that can make a title display as something
/// else, and the BOM / zero-width no-break space.
fn invisible(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// The title as kept: controls removed, whitespace controls as spaces, trimmed, clipped.
pub fn title(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len().min(MAX_TITLE_BYTES));
    for c in raw.chars() {
        let c = match c {
            '\t' | '\n' | '\r' => ' ',
            c if c.is_control() || invisible(c) => continue,
            c => c,
        };
        if out.len() + c.len_utf8() > MAX_TITLE_BYTES {
            break;
        }
        out.push(c);
    }
    let trimmed = out.trim();
    if trimmed.len() == out.len() {
        out
    } else {
        trimmed.to_string()
    }
}

/// The link as kept, or `None` when it is not a safe absolute http(s) URL.
pub fn link(raw: &str) -> Option<String> {
    let s = raw.trim_matches(|c: char| c.is_whitespace() || c.is_control());
    if s.is_empty() || s.len() > MAX_LINK_BYTES {
        return None;
    }
    if s.chars()
        .any(|c| c.is_whitespace() || c.is_control() || invisible(c))
    {
        return None;
    }
    let (scheme, rest) = s.split_once(':')?;
    let web = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
    if !web || !rest.starts_with("//") || rest.len() <= 2 {
        return None;
    }
    Some(s.to_string())
}

/// Whether `title` and `link` would come out of [`title`] and [`link`] unchanged.
pub fn is_clean(title_in: &str, link_in: &str) -> (bool, bool) {
    (
        title(title_in) == title_in,
        link_in.is_empty() || link(link_in).as_deref() == Some(link_in),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_links_are_kept() {
        for bad in [
            "javascript:alert(1)",
            "  JaVaScRiPt:alert(1)",
            "\u{0}javascript:alert(1)",
            "java\tscript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "vbscript:msgbox",
            "file:///etc/passwd",
            "/relative/path",
            "//example.org/x",
            "http:example.org",
            "https://",
            "http://exa mple.org/",
            "http://example.org/\u{202E}gpj.exe",
        ] {
            assert_eq!(link(bad), None, "{bad:?}");
        }
        assert_eq!(
            link(" https://example.org/a?b=c#d\n").as_deref(),
            Some("https://example.org/a?b=c#d")
        );
        assert_eq!(
            link("HTTP://EXAMPLE.ORG/").as_deref(),
            Some("HTTP://EXAMPLE.ORG/")
        );
        let long = format!("https://example.org/{}", "a".repeat(MAX_LINK_BYTES));
        assert_eq!(link(&long), None, "cut URLs point elsewhere: dropped");
    }

    #[test]
    fn titles_lose_controls_and_length_but_keep_their_text() {
        assert_eq!(title("a\u{0}b\u{7}c\u{7f}d\u{85}e"), "abcde");
        assert_eq!(title("  two\nlines\t "), "two lines");
        assert_eq!(title("\u{202E}txt.exe"), "txt.exe");
        assert_eq!(
            title("<script>alert(1)</script>"),
            "<script>alert(1)</script>",
            "data, not markup: served as written"
        );
        let long = "é".repeat(MAX_TITLE_BYTES);
        let t = title(&long);
        assert_eq!(t.len(), MAX_TITLE_BYTES);
        assert!(t.chars().all(|c| c == 'é'));
        assert_eq!(is_clean("ok", "https://a.example/"), (true, true));
        assert_eq!(is_clean("o\u{1}k", "javascript:x"), (false, false));
    }
}
