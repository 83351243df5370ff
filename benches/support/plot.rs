//! A line plot of GB/s against n as a standalone SVG (opens in any browser), with no plotting dependency.
use std::fmt::Write;

/// One line: a name and (log2 n, GB/s) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

const COLORS: [&str; 10] = [
    "#9e9e9e", "#8d6e63", "#ff9800", "#fdd835", "#8bc34a", "#26a69a", "#1e88e5", "#d81b60",
    "#5e35b1", "#000000",
];

/// Renders `series` over x in [x0, x1] (log2 n) and y in [0, y_max] GB/s, with a dashed line at `peak`.
pub fn svg(title: &str, series: &[Series], (x0, x1): (f64, f64), y_max: f64, peak: f64) -> String {
    let (w, h, left, right, top, bottom) = (900.0, 540.0, 70.0, 230.0, 40.0, 50.0);
    let px = |x: f64| left + (x - x0) / (x1 - x0) * (w - left - right);
    let py = |y: f64| h - bottom - y / y_max * (h - top - bottom);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{}" y="22" font-size="15">{title}</text>"#,
        left
    );
    for i in 0..=5 {
        let y = y_max * i as f64 / 5.0;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{0}" y1="{1}" y2="{1}" stroke="#ddd"/><text x="{2}" y="{3}" text-anchor="end">{y:.0}</text>"##,
            w - right,
            py(y),
            left - 6.0,
            py(y) + 4.0
        );
    }
    let mut x = x0;
    while x <= x1 + 1e-9 {
        let _ = writeln!(
            s,
            r##"<line x1="{0}" x2="{0}" y1="{top}" y2="{1}" stroke="#eee"/><text x="{0}" y="{2}" text-anchor="middle">2^{x:.0}</text>"##,
            px(x),
            h - bottom,
            h - bottom + 16.0
        );
        x += 2.0;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{left}" x2="{0}" y1="{1}" y2="{1}" stroke="#e53935" stroke-dasharray="6,4"/><text x="{2}" y="{3}" fill="#e53935">copy {peak:.0} GB/s</text>"##,
        w - right,
        py(peak),
        left + 4.0,
        py(peak) - 4.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">n (f32 elements)</text><text transform="translate(16,{}) rotate(-90)" text-anchor="middle">GB/s</text>"#,
        (left + w - right) / 2.0,
        h - 12.0,
        h / 2.0
    );
    for (i, ser) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<String> = ser
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y.min(y_max))))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            pts.join(" ")
        );
        let ly = top + 10.0 + i as f64 * 20.0;
        let _ = writeln!(
            s,
            r#"<line x1="{0}" x2="{1}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="3"/><text x="{2}" y="{3}">{4}</text>"#,
            w - right + 15.0,
            w - right + 40.0,
            w - right + 46.0,
            ly + 4.0,
            ser.name
        );
    }
    s.push_str("</svg>\n");
    s
}
