//! GPU tests of `DeviceSelect` on every element type: each predicate that the type takes (`gt`, `lt`,
//! `nonzero`, and `finite` for floats) and the byte mask, unordered, stable and flagged, at element
//! offsets 0–3 (unaligned heads) and lengths around the vector and tile sizes, against a CPU filter,
//! with NaN, ±0 and ±∞ among the floats and MIN/MAX among the integers. Ignored without a GPU.
mod common;

use common::{max_n, rng};
use cust::memory::{CopyDestination, DeviceBuffer};
use rand::Rng;
use rand::rngs::SmallRng;
use reduce_host::{
    BF16, DeviceSelect, DeviceView, F16, GreaterThan, IsFinite, LessThan, NonZero, Predicate,
    SelectElement,
};

/// What the CPU filter needs of an element: random values with the type's special ones, its order,
/// zero and finiteness by value, and exact bits for comparing outputs.
trait Case: SelectElement {
    fn random(r: &mut SmallRng) -> Self;
    fn gt(self, t: Self) -> bool;
    fn is_zero(self) -> bool;
    fn finite(self) -> bool;
    fn bits(self) -> u64;
}

macro_rules! int_case {
    ($($t:ty),*) => {$(
        impl Case for $t {
            fn random(r: &mut SmallRng) -> Self {
                match r.random_range(0..16) {
                    0 => <$t>::MIN,
                    1 => <$t>::MAX,
                    2 | 3 => 0,
                    _ => r.random(),
                }
            }
            fn gt(self, t: Self) -> bool {
                self > t
            }
            fn is_zero(self) -> bool {
                self == 0
            }
            fn finite(self) -> bool {
                true
            }
            fn bits(self) -> u64 {
                self as u64
            }
        }
    )*};
}
int_case!(i32, u32, i64, u64, u8);

/// Floats: `from` turns an f32 into the type (rounding), `wide` widens it for comparing.
macro_rules! float_case {
    ($($t:ty: $from:expr, $wide:expr, $bits:expr);* $(;)?) => {$(
        impl Case for $t {
            fn random(r: &mut SmallRng) -> Self {
                let x = match r.random_range(0..20) {
                    0 => f32::NAN,
                    1 => f32::INFINITY,
                    2 => f32::NEG_INFINITY,
                    3 => 0.0,
                    4 => -0.0,
                    _ => r.random_range(-4.0f32..4.0),
                };
                $from(x)
            }
            fn gt(self, t: Self) -> bool {
                $wide(self) > $wide(t)
            }
            fn is_zero(self) -> bool {
                $wide(self) == 0.0
            }
            fn finite(self) -> bool {
                $wide(self).is_finite()
            }
            fn bits(self) -> u64 {
                $bits(self)
            }
        }
    )*};
}
float_case! {
    f32: |x| x, |x: f32| x as f64, |x: f32| x.to_bits() as u64;
    f64: |x: f32| x as f64, |x| x, |x: f64| x.to_bits();
    F16: |x| F16::from(half::f16::from_f32(x)), |x: F16| x.to_f32() as f64, |x: F16| half::f16::from(x).to_bits() as u64;
    BF16: |x| BF16::from(half::bf16::from_f32(x)), |x: BF16| x.to_f32() as f64, |x: BF16| half::bf16::from(x).to_bits() as u64;
}

fn handle() -> DeviceSelect {
    DeviceSelect::new()
        .expect("GPU tests need a CUDA device (run them with --include-ignored only on a GPU)")
}

/// One input at element offset `offset` of its buffer, and what it is checked with.
struct Input<T: Case> {
    buffer: DeviceBuffer<T>,
    offset: usize,
    data: Vec<T>,
    flags: DeviceBuffer<u8>,
    flag_data: Vec<u8>,
}

impl<T: Case> Input<T> {
    fn new(r: &mut SmallRng, n: usize, offset: usize) -> Self {
        let data: Vec<T> = (0..n).map(|_| T::random(r)).collect();
        let mut padded: Vec<T> = (0..offset).map(|_| T::random(r)).collect();
        padded.extend_from_slice(&data);
        let flag_data: Vec<u8> = (0..n).map(|_| r.random_range(0..3)).collect();
        Input {
            buffer: DeviceBuffer::from_slice(&padded).unwrap(),
            offset,
            data,
            flags: DeviceBuffer::from_slice(&flag_data).unwrap(),
            flag_data,
        }
    }

    fn view(&self) -> DeviceView<'_, T> {
        DeviceView::from(&self.buffer).slice(self.offset..)
    }
}

fn bits<T: Case>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.bits()).collect()
}

/// Runs `pred` (kept by `keep` on the CPU) unordered and stable, and checks both.
fn check_predicate<T: Case, P: Predicate<T>>(
    select: &mut DeviceSelect,
    input: &Input<T>,
    pred: P,
    keep: impl Fn(T) -> bool,
    what: &str,
) {
    let want: Vec<T> = input.data.iter().copied().filter(|&x| keep(x)).collect();
    let n = input.data.len();
    let mut out = DeviceBuffer::from_slice(&vec![T::default(); n.max(1)]).unwrap();
    let count = select
        .select_if_stable(input.view(), pred, &mut out)
        .unwrap() as usize;
    let mut got = vec![T::default(); n.max(1)];
    out.copy_to(&mut got[..]).unwrap();
    assert_eq!(count, want.len(), "{what} stable count");
    assert_eq!(bits(&got[..count]), bits(&want), "{what} stable");
    let count = select.select_if(input.view(), pred, &mut out).unwrap() as usize;
    out.copy_to(&mut got[..]).unwrap();
    assert_eq!(count, want.len(), "{what} unordered count");
    let (mut a, mut b) = (bits(&got[..count]), bits(&want));
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, b, "{what} unordered");
}

fn check_type<T: Case>(name: &str, finite: Option<fn(&mut DeviceSelect, &Input<T>, &str)>) {
    let mut select = handle();
    let mut r = rng(0x5e1ec7 ^ name.len() as u64);
    let sizes = [1usize, 15, 17, 33, 511, 4097, 65_537, (1 << 20) + 3];
    for (i, &n) in sizes.iter().filter(|&&n| n <= max_n()).enumerate() {
        let input = Input::<T>::new(&mut r, n, i % 4);
        let what = format!("{name} n={n} offset={}", i % 4);
        let t = input.data[n / 2];
        check_predicate(
            &mut select,
            &input,
            GreaterThan(t),
            |x| x.gt(t),
            &format!("{what} gt"),
        );
        check_predicate(
            &mut select,
            &input,
            LessThan(t),
            |x| t.gt(x),
            &format!("{what} lt"),
        );
        check_predicate(
            &mut select,
            &input,
            NonZero,
            |x| !x.is_zero(),
            &format!("{what} nonzero"),
        );
        if let Some(finite) = finite {
            finite(&mut select, &input, &what);
        }
        let want: Vec<T> = input
            .data
            .iter()
            .zip(&input.flag_data)
            .filter(|&(_, &f)| f != 0)
            .map(|(&x, _)| x)
            .collect();
        let mut out = DeviceBuffer::from_slice(&vec![T::default(); n]).unwrap();
        let count = select
            .select_flagged(input.view(), &input.flags, &mut out)
            .unwrap() as usize;
        let mut got = vec![T::default(); n];
        out.copy_to(&mut got[..]).unwrap();
        assert_eq!(count, want.len(), "{what} flagged count");
        assert_eq!(bits(&got[..count]), bits(&want), "{what} flagged");
    }
}

fn finite<T: Case + reduce_contract::Float>(s: &mut DeviceSelect, input: &Input<T>, what: &str) {
    check_predicate(
        s,
        input,
        IsFinite,
        |x| x.finite(),
        &format!("{what} finite"),
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn every_element_type_selects_as_the_cpu_filter() {
    check_type::<f32>("f32", Some(finite::<f32>));
    check_type::<f64>("f64", Some(finite::<f64>));
    check_type::<F16>("f16", Some(finite::<F16>));
    check_type::<BF16>("bf16", Some(finite::<BF16>));
    check_type::<i32>("i32", None);
    check_type::<u32>("u32", None);
    check_type::<i64>("i64", None);
    check_type::<u64>("u64", None);
    check_type::<u8>("u8", None);
}
