//! What the top-k tests share: the order of values they check against and their inputs.
use std::cmp::Ordering;

use rand::Rng;

use super::{TestElement, rng};

/// `a` before `b` in `max_k`'s order of values (`largest`), or `min_k`'s: NaN first, then the better.
pub fn by_value<T: TestElement>(a: T, b: T, largest: bool) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => {
            let o = a.partial_cmp(&b).expect("numbers compare");
            if largest { o.reverse() } else { o }
        }
    }
}

/// Random values with ties (a fifth drawn from a few values) and the type's specials planted.
pub fn tied_input<T: TestElement>(n: usize, seed: u64) -> Vec<T> {
    let mut r = rng(seed);
    let pool: Vec<T> = (0..4).map(|_| T::random(&mut r)).collect();
    let mut v: Vec<T> = (0..n)
        .map(|_| {
            if r.random_range(0..5) == 0 {
                pool[r.random_range(0..pool.len())]
            } else {
                T::random(&mut r)
            }
        })
        .collect();
    for (j, s) in T::specials().into_iter().enumerate() {
        if n > 0 {
            let at = (j * 7919 + n / 2) % n;
            v[at] = s;
        }
    }
    v
}
