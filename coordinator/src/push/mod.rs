//! The leader's WebSub side besides the subscriptions' state ([`crate::control::push`]):
//! the callback listener hubs call ([`listener`]) and the signature check of pushed content
//! ([`signature`]). Design and what is built: docs/WEBSUB.md.

pub mod listener;
pub mod signature;

/// Counts a request to the callback listener by its result (a closed set of labels).
fn record(result: &'static str) {
    metrics::counter!(crate::metrics::PUSH_REQUESTS_TOTAL, "result" => result).increment(1);
}

/// The URL a delivery's `Link` headers name as `rel="self"` (its topic, WebSub §7), if
/// any: each value holds links `<URL>; rel="…"` separated by commas.
pub fn links_self(values: &[String]) -> Option<String> {
    for v in values {
        let mut rest = v.as_str();
        while let Some(open) = rest.find('<') {
            let Some(close) = rest[open..].find('>') else {
                break;
            };
            let url = &rest[open + 1..open + close];
            let after = &rest[open + close + 1..];
            let params = &after[..after.find('<').unwrap_or(after.len())];
            let is_self = params.split(';').any(|p| {
                let p = p.trim().trim_end_matches(',').trim();
                let Some((k, val)) = p.split_once('=') else {
                    return false;
                };
                k.trim().eq_ignore_ascii_case("rel")
                    && val
                        .trim()
                        .trim_matches('"')
                        .split_ascii_whitespace()
                        .any(|r| r.eq_ignore_ascii_case("self"))
            });
            if is_self {
                return Some(url.to_string());
            }
            rest = after;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_self_link_of_a_delivery_is_found_among_others() {
        let v = vec![
            r#"<https://hub.example/>; rel="hub", <https://a.example/feed>; rel="self""#
                .to_string(),
        ];
        assert_eq!(
            super::links_self(&v).as_deref(),
            Some("https://a.example/feed")
        );
        let two = vec![
            "<https://hub.example/>; rel=hub".to_string(),
            "<https://b.example/x>; rel=\"alternate self\"".to_string(),
        ];
        assert_eq!(
            super::links_self(&two).as_deref(),
            Some("https://b.example/x")
        );
        assert_eq!(super::links_self(&["<https://x/>; rel=hub".into()]), None);
        assert_eq!(
            super::links_self(&["<<<>>;;rel=".into(), "garbage".into()]),
            None
        );
    }
}
