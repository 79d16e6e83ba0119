//! The order of a search's results by distance, ties included, as Redis's sorts leave them.
//!
//! Results at equal distances (members at one position, or placed symmetrically around the
//! centre) keep no order of their own: they come out in whatever order the sort leaves them.
//! Redis sorts all its results with the C library's `qsort`, which glibc implements as a
//! stable top-down merge sort, and when COUNT keeps fewer than it found, only the first COUNT
//! places with its own partial quicksort (Bentley and McIlroy's, which descends only into
//! the parts that overlap those places). Each is written out here so that ties come out as
//! they do in Redis. The comparison is Redis's too: equal, greater, or else less, so that a
//! NaN distance compares less than anything on either side (a total order could not say so).

use std::cmp::Ordering;

/// Below this many elements the partial quicksort sorts by insertion.
const INSERTION_BELOW: usize = 7;
/// Above this many elements it takes its pivot as the median of three medians.
const NINTHER_ABOVE: usize = 40;

/// Redis's comparison of two distances, nearer first (or further first if `descending`).
pub fn compare(a: f64, b: f64, descending: bool) -> Ordering {
    let ascending = if a == b {
        Ordering::Equal
    } else if a > b {
        Ordering::Greater
    } else {
        Ordering::Less
    };
    if descending {
        ascending.reverse()
    } else {
        ascending
    }
}

/// Orders `items` by `cmp` so that at least the first `wanted` places hold what a full sort
/// would put there: the whole slice by merge sort when `wanted` covers it, else by the partial
/// quicksort.
pub fn sort_first<T: Clone>(items: &mut [T], wanted: usize, cmp: &impl Fn(&T, &T) -> Ordering) {
    if wanted >= items.len() {
        merge_sort(items, cmp);
    } else if wanted > 0 {
        partial_quicksort(items, wanted - 1, cmp);
    }
}

/// glibc's `qsort`: halves (the first has the smaller half of an odd count), each sorted,
/// merged taking from the first half unless its element compares greater.
fn merge_sort<T: Clone>(items: &mut [T], cmp: &impl Fn(&T, &T) -> Ordering) {
    if items.len() < 2 {
        return;
    }
    let middle = items.len() / 2;
    merge_sort(&mut items[..middle], cmp);
    merge_sort(&mut items[middle..], cmp);
    let (first, second) = items.split_at(middle);
    let mut merged = Vec::with_capacity(items.len());
    let (mut i, mut j) = (0, 0);
    while i < first.len() && j < second.len() {
        if cmp(&first[i], &second[j]) != Ordering::Greater {
            merged.push(first[i].clone());
            i += 1;
        } else {
            merged.push(second[j].clone());
            j += 1;
        }
    }
    merged.extend_from_slice(&first[i..]);
    merged.extend_from_slice(&second[j..]);
    items.clone_from_slice(&merged);
}

/// Insertion sort that moves an element down past those that compare greater.
fn insertion_sort<T>(items: &mut [T], cmp: &impl Fn(&T, &T) -> Ordering) {
    for end in 1..items.len() {
        let mut at = end;
        while at > 0 && cmp(&items[at - 1], &items[at]) == Ordering::Greater {
            items.swap(at, at - 1);
            at -= 1;
        }
    }
}

/// Of three places, the one whose element is the median.
fn median_of_three<T>(
    items: &[T],
    (a, b, c): (usize, usize, usize),
    cmp: &impl Fn(&T, &T) -> Ordering,
) -> usize {
    let less = |x: usize, y: usize| cmp(&items[x], &items[y]) == Ordering::Less;
    let greater = |x: usize, y: usize| cmp(&items[x], &items[y]) == Ordering::Greater;
    if less(a, b) {
        if less(b, c) {
            b
        } else if less(a, c) {
            c
        } else {
            a
        }
    } else if greater(b, c) {
        b
    } else if less(a, c) {
        a
    } else {
        c
    }
}

/// The pivot's place: the middle element for 7, the median of the first, middle and last
/// above that, each of them a median of three spaced an eighth apart above 40.
fn pivot<T>(items: &[T], cmp: &impl Fn(&T, &T) -> Ordering) -> usize {
    let n = items.len();
    let middle = n / 2;
    if n == INSERTION_BELOW {
        return middle;
    }
    let (mut low, mut mid, mut high) = (0, middle, n - 1);
    if n > NINTHER_ABOVE {
        let d = n / 8;
        low = median_of_three(items, (low, low + d, low + 2 * d), cmp);
        mid = median_of_three(items, (mid - d, mid, mid + d), cmp);
        high = median_of_three(items, (high - 2 * d, high - d, high), cmp);
    }
    median_of_three(items, (low, mid, high), cmp)
}

/// Swaps `len` elements from `a` with `len` from `b`, pairwise from the first.
fn swap_runs<T>(items: &mut [T], a: usize, b: usize, len: usize) {
    for k in 0..len {
        items.swap(a + k, b + k);
    }
}

/// Redis's partial quicksort of `items` for the places up to `last` (0-based).
fn partial_quicksort<T>(items: &mut [T], last: usize, cmp: &impl Fn(&T, &T) -> Ordering) {
    partial_quicksort_at(items, 0, last, cmp);
}

/// The partial quicksort of a part of the whole slice that begins at `offset` in it: a part
/// entirely past `last` is left as it is.
fn partial_quicksort_at<T>(
    mut items: &mut [T],
    mut offset: usize,
    last: usize,
    cmp: &impl Fn(&T, &T) -> Ordering,
) {
    loop {
        let n = items.len();
        if n < INSERTION_BELOW {
            insertion_sort(items, cmp);
            return;
        }
        let (low_end, high_start) = partition(items, cmp);
        // What compares less than the pivot is at 0..low_end, greater at high_start..n; the
        // elements equal to it lie between, in their final places.
        if low_end > 1 && offset <= last {
            partial_quicksort_at(&mut items[..low_end], offset, last, cmp);
        }
        if n - high_start > 1 && offset + high_start <= last {
            offset += high_start;
            items = &mut items[high_start..];
            continue;
        }
        return;
    }
}

/// Bentley and McIlroy's three-way partition around the pivot, swapped to the front: equal
/// elements gather at both ends while the less and greater ones are exchanged across the
/// middle, then the equal ones are swapped into the middle. Returns where the less part
/// ends and where the greater part begins.
fn partition<T>(items: &mut [T], cmp: &impl Fn(&T, &T) -> Ordering) -> (usize, usize) {
    let n = items.len();
    let chosen = pivot(items, cmp);
    items.swap(0, chosen);
    // Equal ones gather at 1..a and d+1..n; b scans up and c down.
    let (mut a, mut b) = (1, 1);
    let (mut c, mut d) = (n - 1, n - 1);
    loop {
        while b <= c {
            let order = cmp(&items[b], &items[0]);
            if order == Ordering::Greater {
                break;
            }
            if order == Ordering::Equal {
                items.swap(a, b);
                a += 1;
            }
            b += 1;
        }
        while b <= c {
            let order = cmp(&items[c], &items[0]);
            if order == Ordering::Less {
                break;
            }
            if order == Ordering::Equal {
                items.swap(c, d);
                d -= 1;
            }
            c -= 1;
        }
        if b > c {
            break;
        }
        items.swap(b, c);
        b += 1;
        c -= 1;
    }
    let len = a.min(b - a);
    swap_runs(items, 0, b - len, len);
    let len = (d - c).min(n - d - 1);
    swap_runs(items, b, n - len, len);
    (b - a, n - (d - c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_key(a: &(u32, char), b: &(u32, char)) -> Ordering {
        a.0.cmp(&b.0)
    }

    fn letters(items: &[(u32, char)]) -> String {
        items.iter().map(|(_, c)| *c).collect()
    }

    #[test]
    fn the_merge_sort_keeps_ties_in_their_order() {
        let mut items: Vec<(u32, char)> = "dacbe"
            .chars()
            .zip([2, 1, 2, 1, 0])
            .map(|(c, k)| (k, c))
            .collect();
        sort_first(&mut items, 5, &by_key);
        assert_eq!(letters(&items), "eabdc");
    }

    #[test]
    fn the_partial_quicksort_sorts_the_places_asked_for() {
        let keys = [9, 3, 7, 1, 8, 2, 6, 0, 5, 4, 3, 7, 1, 9, 0, 2, 8, 6, 4, 5];
        for wanted in 1..keys.len() {
            let mut items: Vec<(u32, char)> = keys.iter().map(|&k| (k, 'x')).collect();
            sort_first(&mut items, wanted, &by_key);
            let mut sorted = keys.to_vec();
            sorted.sort_unstable();
            let got: Vec<u32> = items.iter().map(|(k, _)| *k).collect();
            assert_eq!(got[..wanted], sorted[..wanted], "first {wanted}");
            let mut all = got.clone();
            all.sort_unstable();
            assert_eq!(all, sorted, "a permutation");
        }
    }

    #[test]
    fn the_partial_quicksort_sorts_by_insertion_below_seven() {
        let mut items: Vec<(u32, char)> = "abcdef"
            .chars()
            .zip([1, 0, 1, 0, 1, 0])
            .map(|(c, k)| (k, c))
            .collect();
        sort_first(&mut items, 2, &by_key);
        assert_eq!(letters(&items), "bdface");
    }

    #[test]
    fn a_nan_distance_compares_less_on_both_sides() {
        assert_eq!(compare(f64::NAN, 1.0, false), Ordering::Less);
        assert_eq!(compare(1.0, f64::NAN, false), Ordering::Less);
        assert_eq!(compare(1.0, 2.0, true), Ordering::Greater);
        let mut items = vec![(3.0, 'a'), (f64::NAN, 'b'), (1.0, 'c')];
        // No panic, and every element is kept.
        sort_first(&mut items, 3, &|x: &(f64, char), y: &(f64, char)| {
            compare(x.0, y.0, false)
        });
        assert_eq!(items.len(), 3);
    }
}
