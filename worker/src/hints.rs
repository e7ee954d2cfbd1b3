//! Channel-level refresh hints that the feed parser does not expose: the RSS
//! `<skipHours>`/`<skipDays>` lists and the Syndication module's `sy:updatePeriod` /
//! `sy:updateFrequency`. One lenient pass over the XML events (end tags are not checked)
//! that stops at the first error, keeping what it found; a bad value is ignored, not an
//! error — hints are advice, and a feed's items must not depend on them.

use quick_xml::events::Event;
use quick_xml::Reader;

/// Refresh hints of a document (0 = none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DocHints {
    /// Seconds between updates, from `sy:updatePeriod` / `sy:updateFrequency`.
    pub update_period_seconds: u32,
    /// `skipHours`: bit `h` = hour `h` UTC (24 read as 0).
    pub skip_hours: u32,
    /// `skipDays`: bit 0 = Monday … bit 6 = Sunday.
    pub skip_days: u32,
}

/// Events read at most: hints sit in the channel header, and a huge document should not
/// cost a second full pass.
const MAX_EVENTS: usize = 200_000;

#[derive(Clone, Copy, PartialEq)]
enum In {
    Other,
    SkipHours,
    SkipDays,
}

/// Scans an XML feed document for refresh hints. Non-XML bodies (JSON Feed) give none.
pub fn scan(body: &[u8]) -> DocHints {
    let mut out = DocHints::default();
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'<')
        && !body.starts_with(&[0xef, 0xbb, 0xbf])
    {
        return out;
    }
    let mut reader = Reader::from_reader(body);
    reader.config_mut().check_end_names = false;
    let mut buf = Vec::new();
    let mut section = In::Other;
    let mut in_item = false;
    let mut element: Vec<u8> = Vec::new();
    let (mut period, mut frequency): (Option<u32>, Option<u32>) = (None, None);
    for _ in 0..MAX_EVENTS {
        buf.clear();
        match reader.read_event_into(&mut buf) {
            Ok(Event::Start(e)) => {
                let name = e.local_name().as_ref().to_ascii_lowercase();
                match name.as_slice() {
                    b"skiphours" => section = In::SkipHours,
                    b"skipdays" => section = In::SkipDays,
                    // Hints belong to the channel; items may carry their own `sy:` fields.
                    b"item" | b"entry" => in_item = true,
                    _ => {}
                }
                element = name;
            }
            Ok(Event::End(e)) => {
                let name = e.local_name().as_ref().to_ascii_lowercase();
                match name.as_slice() {
                    b"skiphours" | b"skipdays" => section = In::Other,
                    b"item" | b"entry" => in_item = false,
                    _ => {}
                }
                element.clear();
            }
            Ok(Event::Text(t)) => {
                let Ok(text) = t.decode() else { continue };
                let text = text.trim();
                match (section, element.as_slice()) {
                    (In::SkipHours, b"hour") => {
                        if let Ok(h) = text.parse::<u32>() {
                            if h <= 24 {
                                out.skip_hours |= 1 << (h % 24);
                            }
                        }
                    }
                    (In::SkipDays, b"day") => {
                        if let Some(d) = weekday(text) {
                            out.skip_days |= 1 << d;
                        }
                    }
                    (In::Other, b"updateperiod") if !in_item => period = period_seconds(text),
                    (In::Other, b"updatefrequency") if !in_item => {
                        frequency = text.parse::<u32>().ok().filter(|&f| f > 0)
                    }
                    _ => {}
                }
            }
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    if let Some(p) = period {
        out.update_period_seconds = p / frequency.unwrap_or(1);
    } else if frequency.is_some() {
        // The module's default period is daily.
        out.update_period_seconds = 86_400 / frequency.unwrap_or(1);
    }
    out
}

fn period_seconds(s: &str) -> Option<u32> {
    Some(match s.to_ascii_lowercase().as_str() {
        "hourly" => 3_600,
        "daily" => 86_400,
        "weekly" => 7 * 86_400,
        "monthly" => 30 * 86_400,
        "yearly" => 365 * 86_400,
        _ => return None,
    })
}

fn weekday(s: &str) -> Option<u32> {
    const DAYS: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let s = s.to_ascii_lowercase();
    DAYS.iter().position(|d| *d == s).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_hints_are_read() {
        let doc = br#"<?xml version="1.0"?>
<rss version="2.0" xmlns:sy="http://purl.org/rss/1.0/modules/syndication/"><channel>
<title>t</title><sy:updatePeriod>hourly</sy:updatePeriod><sy:updateFrequency>2</sy:updateFrequency>
<skipHours><hour>0</hour><hour>1</hour><hour>24</hour><hour>99</hour><hour>x</hour></skipHours>
<skipDays><day>Saturday</day><day>sunday</day><day>Caturday</day></skipDays>
<item><title>a</title><sy:updatePeriod>yearly</sy:updatePeriod></item>
</channel></rss>"#;
        assert_eq!(
            scan(doc),
            DocHints {
                update_period_seconds: 1_800,
                skip_hours: 0b11,
                skip_days: 0b110_0000,
            }
        );
    }

    #[test]
    fn defaults_and_non_xml() {
        let daily_twice = br#"<rdf:RDF xmlns:sy="x"><channel><sy:updateFrequency>2</sy:updateFrequency></channel></rdf:RDF>"#;
        assert_eq!(scan(daily_twice).update_period_seconds, 43_200);
        assert_eq!(
            scan(br#"{"version":"https://jsonfeed.org/version/1.1"}"#),
            DocHints::default()
        );
        assert_eq!(
            scan(b"<rss><channel><sy:updatePeriod>often</sy:updatePeriod>"),
            DocHints::default()
        );
        assert_eq!(scan(b"<<<>>>&&&"), DocHints::default());
    }
}
