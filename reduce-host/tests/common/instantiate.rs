//! Macros that turn one generic check into an ignored GPU test per element type. The test file must have
//! `F16` and `BF16` in scope (the generated modules name them through `super`).

/// `#[test] fn <type>() { <check>::<T>() }` for each listed type, in a module named after the check.
#[allow(unused_macros)]
macro_rules! instantiate {
    ($check:ident: $($name:ident = $t:ty),*) => {
        mod $check {
            $(
                #[test]
                #[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
                fn $name() {
                    super::$check::<$t>();
                }
            )*
        }
    };
}

/// [`instantiate!`] over all nine element types.
#[allow(unused_macros)]
macro_rules! every_type {
    ($($check:ident),*) => {$(
        instantiate!($check: f32 = f32, f64 = f64, f16 = super::F16, bf16 = super::BF16, i32 = i32, u32 = u32,
                     i64 = i64, u64 = u64, u8 = u8);
    )*};
}

/// [`instantiate!`] over the four float types.
#[allow(unused_macros)]
macro_rules! float_types {
    ($($check:ident),*) => {$(
        instantiate!($check: f32 = f32, f64 = f64, f16 = super::F16, bf16 = super::BF16);
    )*};
}
