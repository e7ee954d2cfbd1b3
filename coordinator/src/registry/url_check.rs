//! What a feed URL must be to be registered: http or https, no credentials, a host, at
//! most [`MAX_URL_BYTES`] as stored, and no IP literal outside the public address space
//! unless allowed.

use super::{RegistryError, MAX_URL_BYTES};

/// Refuses a normalized feed URL whose host is an IP literal outside the public address
/// space (private, loopback, link-local and its cloud metadata endpoint, CGNAT, multicast,
/// reserved: [`kairos_runtime::address::is_public`]) unless `allowed` holds it. Workers
/// refuse to fetch such a target anyway; refused here, it is an error the caller sees,
/// not a listed feed that fails at every fetch. Host names are left to the workers, which
/// check every DNS answer.
pub fn check_target(url: &str, allowed: &[ipnet::IpNet]) -> Result<(), RegistryError> {
    let Ok(parsed) = url::Url::parse(url) else {
        return Ok(()); // check_url's to refuse
    };
    let ip: std::net::IpAddr = match parsed.host() {
        Some(url::Host::Ipv4(v4)) => v4.into(),
        Some(url::Host::Ipv6(v6)) => v6.into(),
        _ => return Ok(()),
    };
    if kairos_runtime::address::is_public(ip) || allowed.iter().any(|n| n.contains(&ip)) {
        return Ok(());
    }
    Err(RegistryError::InvalidArgument(format!(
        "url names {ip}, which is not a public address (private, loopback, link-local, shared or reserved); a coordinator started with --allow-private NETWORK permits it"
    )))
}

/// Validates a feed URL and returns it normalized with its politeness host.
pub fn check_url(raw: &str) -> Result<(String, String), RegistryError> {
    if raw.len() > MAX_URL_BYTES {
        return Err(RegistryError::InvalidArgument(format!(
            "url of {} bytes is longer than {MAX_URL_BYTES}",
            raw.len()
        )));
    }
    let url = url::Url::parse(raw.trim())
        .map_err(|e| RegistryError::InvalidArgument(format!("url `{raw}`: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(RegistryError::InvalidArgument(format!(
            "url `{raw}`: scheme must be http or https"
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        // Not echoed: the point is to keep them out of every answer and log.
        return Err(RegistryError::InvalidArgument(format!(
            "url of host {} carries credentials (user:password@); they would go to every worker and come back in ListFeeds, so they are refused",
            url.host_str().unwrap_or("?")
        )));
    }
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| RegistryError::InvalidArgument(format!("url `{raw}` has no host")))?;
    // Checked again as stored: percent-encoding makes a non-ASCII character up to 9 bytes
    // (a 4,096-byte URL was stored as 12,252).
    if url.as_str().len() > MAX_URL_BYTES {
        return Err(RegistryError::InvalidArgument(format!(
            "url of {} bytes once percent-encoded is longer than {MAX_URL_BYTES}",
            url.as_str().len()
        )));
    }
    let host = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    Ok((url.to_string(), host))
}
