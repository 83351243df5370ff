//! rustc's PTX, parsed into its top-level items, so a module can be cut into smaller ones: reduce-host
//! cuts the PTX of its kernels into the modules `reduce_contract::kernels::modules` lists, so the host loads
//! (and, without a cubin, JIT-compiles) only the kernels a program uses.
//!
//! rustc's PTX is a header (`.version`, `.target`, `.address_size`), then top-level items: declarations
//! ending in `;` (the `.extern .shared` arrays, globals) and functions (`.entry`, `.func`) with a braced
//! body. A piece gets the header, the declarations and functions its entries name, and its entries.
use std::collections::{BTreeMap, BTreeSet};

/// One top-level item of a PTX file.
struct Item {
    /// The symbol it declares or defines.
    name: String,
    /// Whether it is a kernel entry.
    entry: bool,
    text: String,
}

/// A parsed PTX file: its header and its top-level items, in file order.
pub struct Ptx {
    header: String,
    items: Vec<Item>,
}

impl Ptx {
    /// Parses rustc's PTX output.
    ///
    /// # Errors
    ///
    /// Text without an `.address_size` header, with unbalanced braces, ending inside an item, or with an
    /// item that cannot be named: PTX that did not come from rustc, which this parser does not guess at.
    pub fn parse(text: &str) -> Result<Ptx, String> {
        let end = text
            .find(".address_size")
            .and_then(|i| text[i..].find('\n').map(|j| i + j + 1))
            .ok_or("PTX without an .address_size header")?;
        let header = text[..end].to_owned();
        let mut items = Vec::new();
        let mut current = String::new();
        let mut depth = 0usize;
        let mut in_body = false;
        for line in text[end..].lines() {
            let code = line.split("//").next().unwrap_or("").trim();
            if depth == 0 && !in_body && code.is_empty() {
                continue; // comments and blank lines between items
            }
            current.push_str(line);
            current.push('\n');
            depth += code.matches('{').count();
            depth = depth
                .checked_sub(code.matches('}').count())
                .ok_or("unbalanced braces in PTX")?;
            in_body |= code.contains('{');
            let done = if in_body {
                depth == 0
            } else {
                code.ends_with(';') && depth == 0
            };
            if done {
                items.push(Item::new(std::mem::take(&mut current))?);
                in_body = false;
            }
        }
        if !current.trim().is_empty() {
            return Err(format!("PTX ends inside an item: {}", first_line(&current)));
        }
        Ok(Ptx { header, items })
    }

    /// The names of every `.entry`.
    pub fn entries(&self) -> impl Iterator<Item = &str> {
        self.items
            .iter()
            .filter(|i| i.entry)
            .map(|i| i.name.as_str())
    }

    /// A module holding `entries` and everything they refer to, transitively.
    ///
    /// # Errors
    ///
    /// An entry that is not in the PTX.
    pub fn extract(&self, entries: &[&str]) -> Result<String, String> {
        let by_name: BTreeMap<&str, usize> = self
            .items
            .iter()
            .enumerate()
            .map(|(i, it)| (it.name.as_str(), i))
            .collect();
        let mut keep = BTreeSet::new();
        let mut todo = Vec::new();
        for e in entries {
            let &i = by_name
                .get(e)
                .ok_or_else(|| format!("no kernel {e} in the PTX"))?;
            todo.push(i);
        }
        while let Some(i) = todo.pop() {
            if !keep.insert(i) {
                continue;
            }
            let text = &self.items[i].text;
            for (j, other) in self.items.iter().enumerate() {
                if !other.entry && !keep.contains(&j) && mentions(text, &other.name) {
                    todo.push(j);
                }
            }
        }
        // In file order: rustc declares every symbol before its first use, so any subset keeps that.
        let mut out = self.header.clone();
        for &i in &keep {
            out.push_str(&self.items[i].text);
        }
        Ok(out)
    }
}

impl Item {
    fn new(text: String) -> Result<Item, String> {
        let head: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join(" ");
        let entry = head.contains(".entry ");
        let function = [".entry ", ".func "]
            .iter()
            .find_map(|k| head.find(k).map(|i| i + k.len()));
        let name = if let Some(start) = function {
            function_name(&head[start..])
        } else {
            // `.extern .shared .align 4 .b8 name[];` or `.global .u32 name = 3;`
            head.split([';', '[', '='])
                .next()
                .and_then(|s| s.split_whitespace().last())
        }
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("cannot name the PTX item {}", first_line(&text)))?
        .to_owned();
        Ok(Item { name, entry, text })
    }
}

/// `text` with a `.maxnreg` directive before the body of every `.entry` that `cap` gives a register count:
/// the launch-bounds knob of CUDA C++, which rustc has no attribute for. ptxas then keeps the kernel within
/// that many registers a thread (spilling to local memory if it must), so more blocks fit on an SM.
///
/// # Errors
///
/// An entry whose body never opens: PTX that did not come from rustc.
pub fn cap_registers(text: &str, cap: impl Fn(&str) -> Option<u32>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len() + 64);
    // The cap of the entry whose header is being read, until its body's `{`.
    let mut pending: Option<(String, u32)> = None;
    for line in text.split_inclusive('\n') {
        let code = line.split("//").next().unwrap_or("");
        if let Some(start) = code.find(".entry ").map(|i| i + ".entry ".len()) {
            if let Some((name, _)) = &pending {
                return Err(format!("the entry {name} has no body"));
            }
            let name = function_name(&code[start..]).unwrap_or("");
            pending = cap(name).map(|n| (name.to_owned(), n));
        }
        if code.trim_end().ends_with(';') && !code.contains('{') {
            // A prototype (`.entry name(…);`) has no body: its cap must not land in the next item's.
            if code.contains(".entry ") || code.trim_start().starts_with(')') {
                pending = None;
            }
        }
        if let Some(i) = code.find('{').filter(|_| pending.is_some()) {
            let (_, n) = pending.take().expect("checked");
            // PTX takes performance directives between the parameter list and the body.
            out.push_str(&line[..i]);
            out.push_str(&format!(".maxnreg {n}\n"));
            out.push_str(&line[i..]);
        } else {
            out.push_str(line);
        }
    }
    match pending {
        Some((name, _)) => Err(format!("the entry {name} has no body")),
        None => Ok(out),
    }
}

/// The name of the function whose header continues with `rest` (what follows `.entry ` or `.func `):
/// `name(` or `(.param .b32 r) name(`, skipping a return-value list, then the identifier before the
/// parameter list.
fn function_name(rest: &str) -> Option<&str> {
    let rest = rest.trim_start();
    let rest = match rest.strip_prefix('(') {
        Some(r) => r.split_once(')').map_or("", |(_, after)| after),
        None => rest,
    };
    rest.trim_start()
        .split(|c: char| c == '(' || c == ';' || c.is_whitespace())
        .next()
}

/// Whether `text` uses the identifier `name` (not as part of a longer one).
fn mentions(text: &str, name: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '$';
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

fn first_line(s: &str) -> &str {
    s.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}
