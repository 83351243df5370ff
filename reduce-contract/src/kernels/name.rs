//! [`Name`]: a kernel's or module's name, built from the words of its keys without an allocator (this
//! crate is also built for the device).
use core::ffi::CStr;
use core::fmt;

/// The longest name, NUL included. The longest today, `test_tile_inclusive_scan_sum_f32_16`, has 35 bytes.
const CAPACITY: usize = 64;

/// A name built from words joined by `_`, NUL-terminated, so it is both a `&str` and a `&CStr`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Name {
    bytes: [u8; CAPACITY],
    len: u8,
}

impl Name {
    /// `words` joined by `_`.
    ///
    /// # Panics
    /// If the name would not fit in 63 bytes: the lists only hold short words.
    pub const fn join(words: &[&str]) -> Name {
        let mut bytes = [0u8; CAPACITY];
        let mut len = 0;
        let mut w = 0;
        while w < words.len() {
            if w > 0 {
                bytes[len] = b'_';
                len += 1;
            }
            let word = words[w].as_bytes();
            let mut i = 0;
            while i < word.len() {
                assert!(len < CAPACITY - 1, "kernel names are at most 63 bytes");
                assert!(word[i] != 0, "kernel names hold no NUL");
                bytes[len] = word[i];
                len += 1;
                i += 1;
            }
            w += 1;
        }
        Name {
            bytes,
            len: len as u8,
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // The bytes are the words' (UTF-8) joined by `_`.
        core::str::from_utf8(&self.bytes[..self.len as usize]).expect("names are UTF-8")
    }

    /// The name, NUL-terminated for the driver.
    pub fn as_cstr(&self) -> &CStr {
        CStr::from_bytes_with_nul(&self.bytes[..self.len as usize + 1])
            .expect("one NUL, at the end")
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_words_with_underscores_and_ends_in_nul() {
        let n = Name::join(&["reduce", "last_block", "argmax", "bf16"]);
        assert_eq!(n.as_str(), "reduce_last_block_argmax_bf16");
        assert_eq!(n.as_cstr().to_bytes(), b"reduce_last_block_argmax_bf16");
        assert_eq!(Name::join(&["seed"]).as_str(), "seed");
    }
}
