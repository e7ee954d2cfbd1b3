//! Which IP addresses are public: the one rule both sides of a fetch apply. The worker
//! refuses to connect anywhere else (its DNS answers and redirects included), and the
//! coordinator refuses to register a feed whose URL names such an address as a literal, so
//! a URL that could only reach the crawler's own network (loopback, private ranges, the
//! link-local cloud metadata endpoint) is an error at AddFeed, not a listed feed that
//! fails at every fetch. Both permit what an explicit allow-list names.

use std::net::{IpAddr, Ipv4Addr};

/// Globally routable unicast, by the IANA special-purpose registries (the parts a crawler
/// must never reach by accident).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return is_public_v4(v4);
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || (s[0] == 0x2001 && s[1] == 0) // Teredo (embeds an obfuscated IPv4)
                || (s[0] == 0x0064 && s[1] == 0xff9b) // local-use NAT64 64:ff9b:1::/48
                || (s[0] == 0x0100 && s[1..4] == [0, 0, 0])) // discard-only 100::/64
        }
    }
}

/// The IPv4 address an IPv6 form carries, for the forms a host may route to that IPv4
/// address: IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, the deprecated
/// IPv4-compatible `::a.b.c.d` (not `::` or `::1`), the NAT64 well-known prefix
/// `64:ff9b::/96` and 6to4 `2002:AABB:CCDD::/48`. Each is judged as the address it embeds.
fn embedded_v4(v6: std::net::Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, a, b] | [0, 0, 0, 0, 0xffff, 0, a, b] => Some(v4(a, b)),
        [0, 0, 0, 0, 0, 0, a, b] if a != 0 || b > 1 => Some(v4(a, b)),
        [0x64, 0xff9b, 0, 0, 0, 0, a, b] => Some(v4(a, b)),
        [0x2002, a, b, ..] => Some(v4(a, b)),
        _ => None,
    }
}

fn is_public_v4(v4: Ipv4Addr) -> bool {
    let o = v4.octets();
    !(v4.is_private()
        || v4.is_loopback()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || o[0] == 0 // "this network"
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // shared address space 100.64/10
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking 198.18/15
        || o[0] >= 240) // reserved
}
