//! Growth per operation from samples of (operations done, bytes held):
//! the difference of the medians of the first and last thirds, which a
//! reading the allocator happened to catch high or low cannot move; and
//! the slope of a least-squares line, which uses every sample, so one odd
//! reading moves it by that reading's share.

/// The least-squares slope of `y` over `x` (bytes per operation), or
/// `None` with fewer than two distinct `x`.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// (median y of the last third - median y of the first third) / (median x
/// of the last third - median x of the first third); with two samples,
/// the slope between them; `None` with fewer.
pub fn median_slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let third = (points.len() / 3).max(1);
    let first = &points[..third];
    let last = &points[points.len() - third..];
    let dx = median(last.iter().map(|p| p.0)) - median(first.iter().map(|p| p.0));
    let dy = median(last.iter().map(|p| p.1)) - median(first.iter().map(|p| p.1));
    (dx > 0.0).then(|| dy / dx)
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_straight_line_has_its_slope() {
        let pts: Vec<(f64, f64)> = (0..10)
            .map(|i| (i as f64 * 1000.0, 5e6 + i as f64 * 100_000.0))
            .collect();
        assert!((slope(&pts).unwrap() - 100.0).abs() < 1e-9);
        assert!((median_slope(&pts).unwrap() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn a_spike_at_the_end_moves_only_the_fit() {
        let mut pts: Vec<(f64, f64)> = (0..21).map(|i| (i as f64 * 1000.0, 30e6)).collect();
        pts[20].1 += 3e6;
        assert_eq!(median_slope(&pts), Some(0.0));
        assert!(slope(&pts).unwrap() > 30.0, "{:?}", slope(&pts));
    }

    #[test]
    fn flat_with_one_spike() {
        let mut pts: Vec<(f64, f64)> = (0..9).map(|i| (i as f64 * 1000.0, 1e6)).collect();
        pts[4].1 += 4e6;
        assert!(
            slope(&pts).unwrap().abs() < 1e-9,
            "a spike in the middle tilts nothing"
        );
        assert_eq!(median_slope(&pts), Some(0.0));
    }

    #[test]
    fn too_few_points() {
        assert_eq!(slope(&[(1.0, 2.0)]), None);
        assert_eq!(slope(&[(1.0, 2.0), (1.0, 3.0)]), None);
        assert_eq!(median_slope(&[(1.0, 2.0)]), None);
        assert_eq!(median_slope(&[(1.0, 2.0), (2.0, 3.0)]), Some(1.0));
    }
}
