//! Packed number lists in a feed's stored state (`learned/FEED`, JSON).
//!
//! The state's long lists are item ids (up to 256 a feed) and posting times (up to 4,096):
//! as JSON numbers an id takes about 21 bytes and a time 14, and on etcd every byte of a
//! feed's state is paid a million times over at a million feeds (docs/STATE.md). Packed, an
//! id takes its 8 bytes and a time the zig-zag varint of its difference from the one before
//! (about four bytes for postings a day apart), then base64 for the JSON string: less than
//! half. The rest of the state stays readable JSON (`etcdctl get`), and a list written as a
//! JSON array by an older version is still read.

use base64::engine::general_purpose::STANDARD_NO_PAD as B64;
use base64::Engine;
use serde::de::{Error as _, SeqAccess, Visitor};
use serde::{Deserializer, Serializer};
use std::collections::VecDeque;
use std::fmt;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Times (or any `i64`s), each as the difference from the one before.
fn pack_deltas(values: impl Iterator<Item = i64>) -> String {
    let mut out = Vec::new();
    let mut last = 0i64;
    for v in values {
        put_varint(&mut out, zigzag(v.wrapping_sub(last)));
        last = v;
    }
    B64.encode(out)
}

fn unpack_deltas<E: serde::de::Error>(s: &str) -> Result<Vec<i64>, E> {
    let bytes = B64
        .decode(s)
        .map_err(|e| E::custom(format!("packed numbers: {e}")))?;
    let (mut at, mut last, mut out) = (0, 0i64, Vec::new());
    while at < bytes.len() {
        let d = get_varint(&bytes, &mut at).ok_or_else(|| E::custom("packed numbers cut short"))?;
        last = last.wrapping_add(unzigzag(d));
        out.push(last);
    }
    Ok(out)
}

/// A list of numbers read either packed or, as older versions wrote it, as a JSON array.
struct Either<T>(std::marker::PhantomData<T>);

impl<'de, T: serde::Deserialize<'de>> Visitor<'de> for Either<T> {
    type Value = Result<Vec<T>, String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a packed string or an array of numbers")
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Err(s.to_string()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(Ok(out))
    }
}

/// Item ids: 8 bytes each.
pub mod ids {
    use super::*;

    /// Writes the ids packed.
    pub fn serialize<S: Serializer>(v: &VecDeque<u64>, s: S) -> Result<S::Ok, S::Error> {
        let mut out = Vec::with_capacity(v.len() * 8);
        for id in v {
            out.extend_from_slice(&id.to_le_bytes());
        }
        s.serialize_str(&B64.encode(out))
    }

    /// Reads packed ids or a JSON array of them.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<VecDeque<u64>, D::Error> {
        match d.deserialize_any(Either::<u64>(Default::default()))? {
            Ok(list) => Ok(list.into()),
            Err(s) => {
                let bytes = B64
                    .decode(&s)
                    .map_err(|e| D::Error::custom(format!("packed ids: {e}")))?;
                if bytes.len() % 8 != 0 {
                    return Err(D::Error::custom("packed ids cut short"));
                }
                Ok(bytes
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect())
            }
        }
    }
}

/// Times in ms, ascending or nearly: each as the difference from the one before.
pub mod times {
    use super::*;

    /// Writes the times packed.
    pub fn serialize<S: Serializer>(v: &VecDeque<i64>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&pack_deltas(v.iter().copied()))
    }

    /// Reads packed times or a JSON array of them.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<VecDeque<i64>, D::Error> {
        match d.deserialize_any(Either::<i64>(Default::default()))? {
            Ok(list) => Ok(list.into()),
            Err(s) => Ok(unpack_deltas::<D::Error>(&s)?.into()),
        }
    }
}

/// Intervals `(from, to)` in ms, by `to` ascending: both ends as differences, in turn.
pub mod spans {
    use super::*;

    /// Writes the intervals packed.
    pub fn serialize<S: Serializer>(v: &VecDeque<(i64, i64)>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&pack_deltas(v.iter().flat_map(|&(a, b)| [a, b])))
    }

    /// Reads packed intervals or a JSON array of pairs.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<VecDeque<(i64, i64)>, D::Error> {
        match d.deserialize_any(Either::<(i64, i64)>(Default::default()))? {
            Ok(list) => Ok(list.into()),
            Err(s) => {
                let flat = unpack_deltas::<D::Error>(&s)?;
                if flat.len() % 2 != 0 {
                    return Err(D::Error::custom("packed intervals cut short"));
                }
                Ok(flat.chunks_exact(2).map(|c| (c[0], c[1])).collect())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};
    use std::collections::VecDeque;

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    struct S {
        #[serde(with = "super::ids")]
        ids: VecDeque<u64>,
        #[serde(with = "super::times")]
        times: VecDeque<i64>,
        #[serde(with = "super::spans")]
        spans: VecDeque<(i64, i64)>,
    }

    #[test]
    fn lists_round_trip_packed_and_older_arrays_still_read() {
        let s = S {
            ids: [0, 1, u64::MAX, 0x9e37_79b9_7f4a_7c15].into(),
            times: [
                1_795_000_000_000,
                1_795_000_086_400,
                5,
                -7,
                i64::MIN,
                i64::MAX,
            ]
            .into(),
            spans: [(1_795_000_000_000, 1_795_003_600_000), (-1, 0)].into(),
        };
        let packed = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<S>(&packed).unwrap(), s);
        let arrays = r#"{"ids":[0,1,18446744073709551615,11400714819323198485],
            "times":[1795000000000,1795000086400,5,-7,-9223372036854775808,9223372036854775807],
            "spans":[[1795000000000,1795003600000],[-1,0]]}"#;
        assert_eq!(serde_json::from_str::<S>(arrays).unwrap(), s);
        assert_eq!(
            serde_json::from_str::<S>(r#"{"ids":"","times":"","spans":""}"#).unwrap(),
            S::default()
        );
        // Postings a day apart and 40 ids: about half the bytes of JSON arrays.
        let day = S {
            times: (0..28)
                .map(|i| 1_795_000_000_000 + i * 86_400_000)
                .collect(),
            ids: (0..40u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .collect(),
            ..S::default()
        };
        let packed = serde_json::to_string(&day).unwrap().len();
        let plain = serde_json::to_string(&serde_json::json!({
            "ids": day.ids, "times": day.times, "spans": []
        }))
        .unwrap()
        .len();
        assert!(packed * 100 < plain * 55, "{packed} against {plain}");
        for bad in [
            r#"{"ids":"AAE","times":"","spans":""}"#,
            r#"{"ids":"","times":"gICA","spans":""}"#,
            r#"{"ids":"","times":"","spans":"AA"}"#,
            r#"{"ids":"%%","times":"","spans":""}"#,
        ] {
            assert!(serde_json::from_str::<S>(bad).is_err(), "{bad}");
        }
    }
}
