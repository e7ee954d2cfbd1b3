//! What a feed's host says about it. Feeds of one host (a site's section feeds, a
//! repository's directory feeds) tend to post at like rates and, more so, at like hours:
//! the same people, the same time zone, the same release days. A feed with two postings in
//! two weeks says little about either on its own; its host's other feeds (its siblings) say
//! more than the whole population does. So the learner has three levels: a feed's own
//! counts, shrunk toward its siblings', shrunk toward everyone's.
//!
//! * **Rate.** The prior rate is the geometric mean of the siblings' rates, with the
//!   typical feed's as one more sibling: rates spread over orders of magnitude, and one
//!   busy sibling (a repository's main branch) would dominate an arithmetic mean. A feed
//!   alone on its host keeps the typical rate.
//! * **Hours.** The siblings' hourly counts join the feed's own as evidence for its
//!   posterior shape under the mixture ([`super::shapes`]), weighed as at most a chosen
//!   number of pseudo-postings, so a busy feed's own hours keep their say.
//!
//! Whether the host helps, and how much, is chosen with the other shrinkage on held-out
//! days ([`super::shrink::choose`], strength 0 being "not at all"): on a population whose
//! hosts are only politeness groups (feed `f` on host `f mod k`), the held-out days decline
//! it. The feed itself is always left out of its siblings.

const BINS: usize = 24;

/// Pseudo-postings the siblings' hours may weigh in a feed's evidence, tried by the
/// held-out choice; 0 leaves the host out (the rate then shrinks toward the typical feed's).
pub const CANDIDATES: [f64; 3] = [0.0, 16.0, 128.0];

/// Host groups of at least two feeds, with what each group's feeds observed.
pub struct Siblings {
    /// Per feed (the learner's order): its group, if its host holds another feed.
    group: Vec<Option<u32>>,
    /// Per feed: the log of its rate as a sibling sees it, if it was watched.
    own_log: Vec<Option<f64>>,
    /// Per group: the sum of its watched feeds' log rates, and how many there are.
    log_sum: Vec<(f64, u32)>,
    /// Per group: its feeds' summed hourly counts.
    counts: Vec<[f64; BINS]>,
}

impl Siblings {
    /// Groups `hosts` (per feed; empty = no host). `counts` are each feed's hourly
    /// postings; `rates` each watched feed's rate as its siblings should see it (a feed
    /// never watched has `None` and lends nothing). `None` when no host holds two feeds.
    pub fn new(hosts: &[&str], counts: &[[f64; BINS]], rates: &[Option<f64>]) -> Option<Self> {
        let mut size: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        for h in hosts.iter().filter(|h| !h.is_empty()) {
            *size.entry(h).or_default() += 1;
        }
        let mut index: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let group: Vec<Option<u32>> = hosts
            .iter()
            .map(|h| {
                if h.is_empty() || size.get(h).copied().unwrap_or(0) < 2 {
                    return None;
                }
                let next = index.len() as u32;
                Some(*index.entry(h).or_insert(next))
            })
            .collect();
        if index.is_empty() {
            return None;
        }
        let mut log_sum = vec![(0.0, 0u32); index.len()];
        let mut sums = vec![[0.0f64; BINS]; index.len()];
        let own_log: Vec<Option<f64>> = rates
            .iter()
            .map(|r| r.filter(|r| *r > 0.0 && r.is_finite()).map(f64::ln))
            .collect();
        for (f, g) in group.iter().enumerate() {
            let Some(g) = g else { continue };
            let g = *g as usize;
            if let Some(l) = own_log[f] {
                log_sum[g].0 += l;
                log_sum[g].1 += 1;
            }
            for (s, c) in sums[g].iter_mut().zip(&counts[f]) {
                *s += c;
            }
        }
        Some(Siblings {
            group,
            own_log,
            log_sum,
            counts: sums,
        })
    }

    /// Feed `f`'s group, if it has siblings.
    pub fn group(&self, f: usize) -> Option<u32> {
        self.group.get(f).copied().flatten()
    }

    /// The prior rate of feed `f`: the geometric mean of its watched siblings' rates and
    /// `typical`; `typical` itself when no sibling was watched.
    pub fn rate(&self, f: usize, typical: f64) -> f64 {
        let Some(g) = self.group(f) else {
            return typical;
        };
        let (mut sum, mut n) = self.log_sum[g as usize];
        if let Some(l) = self.own_log[f] {
            sum -= l;
            n -= 1;
        }
        ((sum + typical.ln()) / (n as f64 + 1.0)).exp()
    }

    /// Feed `f`'s siblings' summed hourly counts (its own, `own`, taken out); `None`
    /// without siblings.
    pub fn hours(&self, f: usize, own: &[f64; BINS]) -> Option<[f64; BINS]> {
        let g = self.group(f)? as usize;
        let mut out = self.counts[g];
        for (o, c) in out.iter_mut().zip(own) {
            *o = (*o - c).max(0.0);
        }
        Some(out)
    }
}

/// A feed's evidence for its shape: its own counts plus its siblings', scaled down to at
/// most `pseudo` postings in all.
pub fn evidence(own: &[f64; BINS], siblings: &[f64; BINS], pseudo: f64) -> [f64; BINS] {
    let total: f64 = siblings.iter().sum();
    let scale = if total > pseudo { pseudo / total } else { 1.0 };
    let mut out = *own;
    for (o, s) in out.iter_mut().zip(siblings) {
        *o += scale * s;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hours_at(b: usize, n: f64) -> [f64; BINS] {
        let mut c = [0.0; BINS];
        c[b] = n;
        c
    }

    #[test]
    fn a_feed_alone_on_its_host_keeps_the_typical_rate_and_has_no_siblings() {
        let hosts = ["a", "b", "b", ""];
        let counts = [
            hours_at(1, 2.0),
            hours_at(2, 3.0),
            hours_at(3, 5.0),
            hours_at(4, 1.0),
        ];
        let rates = [Some(1.0), Some(4.0), Some(16.0), Some(2.0)];
        let s = Siblings::new(&hosts, &counts, &rates).unwrap();
        assert_eq!(s.group(0), None);
        assert_eq!(s.group(3), None, "no host is no group");
        assert_eq!(s.rate(0, 0.5), 0.5);
        assert!(s.hours(0, &counts[0]).is_none());
        // Feed 1's prior: geometric mean of its sibling (16) and the typical (0.25) = 2,
        // its own rate left out.
        assert!((s.rate(1, 0.25) - 2.0).abs() < 1e-12);
        assert!((s.rate(2, 0.25) - 1.0).abs() < 1e-12);
        assert_eq!(s.hours(1, &counts[1]).unwrap(), hours_at(3, 5.0));
    }

    #[test]
    fn no_host_with_two_feeds_is_no_siblings_and_unwatched_feeds_lend_no_rate() {
        let counts = [[0.0; BINS]; 3];
        assert!(Siblings::new(&["a", "b", ""], &counts, &[None, None, None]).is_none());
        let s = Siblings::new(&["a", "a", "a"], &counts, &[Some(9.0), None, None]).unwrap();
        // Feed 1 sees one watched sibling (9) and the typical (1): 3.
        assert!((s.rate(1, 1.0) - 3.0).abs() < 1e-12);
        // Feed 0 sees none watched: the typical.
        assert!((s.rate(0, 1.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn siblings_weigh_at_most_the_pseudo_postings() {
        let own = hours_at(0, 2.0);
        let sib = hours_at(5, 400.0);
        let e = evidence(&own, &sib, 16.0);
        assert_eq!(e[0], 2.0);
        assert!((e[5] - 16.0).abs() < 1e-12);
        let few = evidence(&own, &hours_at(5, 3.0), 16.0);
        assert_eq!(few[5], 3.0, "fewer than the cap count as they are");
        assert_eq!(evidence(&own, &sib, 0.0), own);
    }
}
