//! Which directions a nemesis cuts: pure set arithmetic over node indices, kept apart from the
//! `ip rule` commands that apply it so that it is checked without root.
//!
//! A cut is one direction, `(from, to)`: packets from node `from` to node `to` are dropped by
//! the router. Every fault adds cuts; heal removes them all.

use std::collections::BTreeSet;

/// One direction of traffic between two nodes (their indices), dropped while it is in the set.
pub(crate) type Cut = (usize, usize);

/// The cuts of a partition into `groups`: both directions between every two nodes of
/// different groups. Nodes in no group are not cut from anyone.
///
/// # Errors
///
/// When fewer than two groups are given, a group is empty, or a node is in two groups: the
/// partition would not say what the caller meant.
pub(crate) fn partition(groups: &[&[usize]]) -> Result<BTreeSet<Cut>, String> {
    if groups.len() < 2 {
        return Err(format!(
            "a partition needs at least two groups, got {}",
            groups.len()
        ));
    }
    let mut seen = BTreeSet::new();
    for group in groups {
        if group.is_empty() {
            return Err("a partition's group is empty".into());
        }
        for &node in *group {
            if !seen.insert(node) {
                return Err(format!("node {node} is in two groups of the partition"));
            }
        }
    }
    let mut cuts = BTreeSet::new();
    for (i, a_group) in groups.iter().enumerate() {
        for b_group in &groups[i + 1..] {
            for &a in *a_group {
                for &b in *b_group {
                    cuts.insert((a, b));
                    cuts.insert((b, a));
                }
            }
        }
    }
    Ok(cuts)
}

/// The cuts that leave `group` alone with itself: a partition of `group` from every other of
/// the `count` nodes.
///
/// # Errors
///
/// When `group` is empty or holds every node (nothing to isolate it from).
pub(crate) fn isolate(group: &[usize], count: usize) -> Result<BTreeSet<Cut>, String> {
    let rest: Vec<usize> = (0..count).filter(|n| !group.contains(n)).collect();
    if rest.is_empty() {
        return Err("isolating every node from nobody cuts nothing".into());
    }
    partition(&[group, &rest])
}

/// The cuts of a half-open link: both directions between `a` and `b`, silently, so that both
/// ends keep their connections open and hear nothing.
pub(crate) fn half_open(a: usize, b: usize) -> BTreeSet<Cut> {
    BTreeSet::from([(a, b), (b, a)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_cuts_both_ways_between_groups_only() -> Result<(), String> {
        let cuts = partition(&[&[0, 1], &[2]])?;
        assert_eq!(cuts, BTreeSet::from([(0, 2), (2, 0), (1, 2), (2, 1)]));
        let three = partition(&[&[0], &[1], &[2]])?;
        assert_eq!(three.len(), 6);
        Ok(())
    }

    #[test]
    fn a_node_outside_every_group_keeps_its_links() -> Result<(), String> {
        let cuts = partition(&[&[0], &[1]])?;
        assert!(cuts.iter().all(|&(a, b)| a != 3 && b != 3));
        Ok(())
    }

    #[test]
    fn unclear_partitions_are_refused() {
        assert!(partition(&[&[0, 1]]).is_err());
        assert!(partition(&[&[0], &[]]).is_err());
        assert!(partition(&[&[0, 1], &[1, 2]]).is_err());
        assert!(isolate(&[0, 1, 2], 3).is_err());
    }

    #[test]
    fn isolating_a_minority_cuts_it_from_everyone_else() -> Result<(), String> {
        let cuts = isolate(&[0, 3], 5)?;
        for inside in [0, 3] {
            for outside in [1, 2, 4] {
                assert!(cuts.contains(&(inside, outside)) && cuts.contains(&(outside, inside)));
            }
        }
        assert!(!cuts.contains(&(0, 3)));
        assert_eq!(cuts.len(), 12);
        Ok(())
    }
}
