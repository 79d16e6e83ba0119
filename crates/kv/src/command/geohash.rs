//! Geohashes, distances and search areas as Redis's GEO commands compute them, so that every
//! score, position, distance and search answer is Redis's to the last bit.
//!
//! A position is placed in a grid: at step `s`, longitudes [-180, 180] and latitudes
//! [-85.05112878, 85.05112878] (the Web Mercator square) are each cut into 2^s equal parts,
//! and a cell is named by its two indexes with their bits interleaved, longitude in the odd
//! bits and latitude in the even ones. A cell's name at step `s` is thus the prefix of its
//! sub-cells' names, and the cells of one step cover a range of names at step 26. A geo set
//! keeps each member's cell at step 26 (52 bits, exact in an f64) as its sorted-set score;
//! the position it answers is that cell's centre.
//!
//! A search takes the step whose cells are about as large as its shape, the cell holding its
//! centre and that cell's eight neighbours; each cell is a range of scores, and of the members
//! in those ranges it keeps those inside the shape. Distances are great-circle distances on a
//! sphere of Redis's earth radius (haversine).
//!
//! The arithmetic is Redis's, operation by operation: a different order of the same operations
//! would round differently, and a last bit moves a member across a search's edge or a distance's
//! fourth decimal.

use std::cmp::Ordering;
use std::f64::consts::PI;

/// The step of a stored position: 26 bits of longitude and 26 of latitude, a 52-bit score.
pub const STEP_MAX: u8 = 26;
/// Redis's earth radius, in meters.
pub const EARTH_RADIUS: f64 = 6372797.560856;
/// Half the Mercator projection's width, in meters: where the search's step estimate starts.
const MERCATOR_MAX: f64 = 20037726.37;
/// One degree in radians.
const DEGREE: f64 = PI / 180.0;

/// A range of longitudes or latitudes, ends included.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub min: f64,
    pub max: f64,
}

impl Span {
    fn holds(self, value: f64) -> bool {
        value >= self.min && value <= self.max
    }

    /// The part `index` of 2^`step` equal parts (an index past the last part lies beyond
    /// the span; 2^32 - 1 wraps its upper end around to the first, as Redis's u32 does).
    fn part(self, index: u32, step: u8) -> Span {
        let parts = (1u64 << step) as f64;
        let width = self.max - self.min;
        Span {
            min: self.min + (f64::from(index) / parts) * width,
            max: self.min + (f64::from(index.wrapping_add(1)) / parts) * width,
        }
    }

    /// Where `value` lies among 2^`step` equal parts, as a fraction of them (the index is its
    /// whole part; `max` itself is the part past the last).
    fn offset(self, value: f64, step: u8) -> f64 {
        (value - self.min) / (self.max - self.min) * (1u64 << step) as f64
    }
}

pub const LONGITUDES: Span = Span {
    min: -180.0,
    max: 180.0,
};
/// The latitudes a geo set holds: the Web Mercator square's.
pub const LATITUDES: Span = Span {
    min: -85.05112878,
    max: 85.05112878,
};
/// The standard geohash's latitudes, which GEOHASH's strings are written in.
const STANDARD_LATITUDES: Span = Span {
    min: -90.0,
    max: 90.0,
};

/// Whether a geo set can hold a position (GEOADD's and FROMLONLAT's check).
pub fn can_hold(lon: f64, lat: f64) -> bool {
    LONGITUDES.holds(lon) && LATITUDES.holds(lat)
}

/// The bits of `v` spread to the even bits of a u64.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// The even bits of `x` gathered into a u32: the inverse of [`spread`].
fn gather(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x >> 4)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x >> 8)) & 0x0000_ffff_0000_ffff;
    x = (x | (x >> 16)) & 0x0000_0000_ffff_ffff;
    x as u32
}

/// A cell of the grid at `step`: its longitude index in the odd bits, its latitude index in
/// the even ones. An index may hold a bit past the step's (a position on the grid's east or
/// north edge: 180 is the part past the last), as Redis's may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub bits: u64,
    pub step: u8,
}

/// A cell's longitudes and latitudes.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bounds {
    lon: Span,
    lat: Span,
}

impl Cell {
    fn from_indexes(lon: u32, lat: u32, step: u8) -> Cell {
        Cell {
            bits: spread(lat) | (spread(lon) << 1),
            step,
        }
    }

    /// (longitude index, latitude index).
    fn indexes(self) -> (u32, u32) {
        (gather(self.bits >> 1), gather(self.bits))
    }

    /// The cell holding a position at `step`, latitudes cut in `lats`. The position is in the
    /// grid (checked by the caller); its offsets are truncated, as C's conversion does.
    fn holding(lon: f64, lat: f64, step: u8, lats: Span) -> Cell {
        let lon_index = LONGITUDES.offset(lon, step) as u32;
        let lat_index = lats.offset(lat, step) as u32;
        Cell::from_indexes(lon_index, lat_index, step)
    }

    /// The cell named by a sorted-set score: see [`score_bits`].
    fn of_score(score: f64) -> Cell {
        Cell {
            bits: score_bits(score),
            step: STEP_MAX,
        }
    }

    fn bounds(self, lats: Span) -> Bounds {
        let (lon, lat) = self.indexes();
        Bounds {
            lon: LONGITUDES.part(lon, self.step),
            lat: lats.part(lat, self.step),
        }
    }

    /// The cell `east` columns east and `north` rows north, around the grid (north of the
    /// top row is the bottom one). An index that moves loses any bit past the step's; one
    /// that stays keeps it.
    fn moved(self, east: i32, north: i32) -> Cell {
        let (mut lon, mut lat) = self.indexes();
        let mask = (1u32 << self.step) - 1;
        if east != 0 {
            lon = lon.wrapping_add_signed(east) & mask;
        }
        if north != 0 {
            lat = lat.wrapping_add_signed(north) & mask;
        }
        Cell::from_indexes(lon, lat, self.step)
    }

    /// The scores of the positions in this cell: from the first (included) to the first
    /// of the next cell (excluded).
    pub fn scores(self) -> (f64, f64) {
        let shift = 2 * u32::from(STEP_MAX - self.step);
        (
            (self.bits << shift) as f64,
            (self.bits.wrapping_add(1) << shift) as f64,
        )
    }
}

impl Bounds {
    /// The centre, kept within the grid (a cell past its edge has its centre beyond it).
    fn centre(self) -> (f64, f64) {
        let lon = (self.lon.min + self.lon.max) / 2.0;
        let lat = (self.lat.min + self.lat.max) / 2.0;
        (
            lon.clamp(LONGITUDES.min, LONGITUDES.max),
            lat.clamp(LATITUDES.min, LATITUDES.max),
        )
    }
}

/// A score as the u64 Redis reads a cell from: C's conversion as compiled for x86-64, so
/// that a score no GEOADD wrote (from ZADD: negative, fractional, infinite) names the cell
/// Redis takes it for. Below 2^63 the processor truncates toward zero, a negative value
/// wrapping around (-3 is 2^64 - 3), and gives 2^63 where it cannot (-inf); from 2^63 the
/// compiler converts the value less 2^63 and sets the top bit back, so 2^64 and beyond
/// (inf) come out as 0.
fn score_bits(score: f64) -> u64 {
    const TOP: f64 = 9_223_372_036_854_775_808.0;
    let truncated = |x: f64| {
        if (-TOP..TOP).contains(&x) {
            x as i64 as u64
        } else {
            1 << 63
        }
    };
    if score >= TOP {
        truncated(score - TOP) ^ (1 << 63)
    } else {
        truncated(score)
    }
}

/// The score GEOADD gives a position (in the grid): its cell at step 26.
pub fn score(lon: f64, lat: f64) -> f64 {
    Cell::holding(lon, lat, STEP_MAX, LATITUDES).bits as f64
}

/// The position (longitude, latitude) a score stands for: its cell's centre.
pub fn position(score: f64) -> (f64, f64) {
    Cell::of_score(score).bounds(LATITUDES).centre()
}

/// The standard 11-character geohash of a score's position (latitudes in [-90, 90]): 52
/// bits make ten characters and two bits of the eleventh, whose other bits are zeros.
pub fn geohash(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = position(score);
    let bits = Cell::holding(lon, lat, STEP_MAX, STANDARD_LATITUDES).bits;
    let mut text = [b'0'; 11];
    for (i, out) in text.iter_mut().enumerate().take(10) {
        let index = (bits >> (52 - 5 * (i + 1))) & 0x1f;
        *out = ALPHABET[index as usize];
    }
    text
}

fn radians(degrees: f64) -> f64 {
    degrees * DEGREE
}

fn degrees(radians: f64) -> f64 {
    radians / DEGREE
}

/// The great-circle distance in meters between two positions (haversine). On one meridian
/// it is the arc between the latitudes, which Redis computes directly (the last bits differ
/// from the haversine's).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let v = ((radians(lon2) - radians(lon1)) / 2.0).sin();
    if v == 0.0 {
        return EARTH_RADIUS * (radians(lat2) - radians(lat1)).abs();
    }
    let (lat1, lat2) = (radians(lat1), radians(lat2));
    let u = ((lat2 - lat1) / 2.0).sin();
    2.0 * EARTH_RADIUS * (u * u + lat1.cos() * lat2.cos() * v * v).sqrt().asin()
}

/// A search's shape, in its unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    Circle { radius: f64 },
    Rectangle { width: f64, height: f64 },
}

/// What a search covers: a shape around a centre.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Region {
    pub lon: f64,
    pub lat: f64,
    pub shape: Shape,
    /// Meters per unit of the shape.
    pub unit: f64,
}

impl Region {
    /// The distance in meters from the centre to a position, if the shape holds it. A
    /// rectangle holds a position whose distances east-west (along its parallel) and
    /// north-south (along its meridian) from the centre's are within half its sides.
    pub fn reach(&self, lon: f64, lat: f64) -> Option<f64> {
        match self.shape {
            Shape::Circle { radius } => {
                let d = distance(self.lon, self.lat, lon, lat);
                // Only a distance greater than the radius is out: a NaN one (rounding past
                // the antipodes) is in.
                match d.partial_cmp(&(radius * self.unit)) {
                    Some(Ordering::Greater) => None,
                    _ => Some(d),
                }
            }
            Shape::Rectangle { width, height } => {
                let across = distance(lon, lat, self.lon, lat);
                let along = distance(lon, lat, lon, self.lat);
                if across > width * self.unit / 2.0 || along > height * self.unit / 2.0 {
                    return None;
                }
                Some(distance(self.lon, self.lat, lon, lat))
            }
        }
    }

    /// Half the shape's extent east-west and north-south, in meters.
    fn half_extents(&self) -> (f64, f64) {
        match self.shape {
            Shape::Circle { radius } => (self.unit * radius, self.unit * radius),
            Shape::Rectangle { width, height } => {
                (self.unit * (width / 2.0), self.unit * (height / 2.0))
            }
        }
    }

    /// The longitudes and latitudes around the shape: a rectangle's corners are furthest
    /// apart in longitude on the side nearer a pole.
    fn bounds(&self) -> Bounds {
        let (width, height) = self.half_extents();
        let lat_delta = degrees(height / EARTH_RADIUS);
        let lon_delta_at = |lat: f64| degrees(width / EARTH_RADIUS / radians(lat).cos());
        let lon_delta = if self.lat < 0.0 {
            lon_delta_at(self.lat - lat_delta)
        } else {
            lon_delta_at(self.lat + lat_delta)
        };
        Bounds {
            lon: Span {
                min: self.lon - lon_delta,
                max: self.lon + lon_delta,
            },
            lat: Span {
                min: self.lat - lat_delta,
                max: self.lat + lat_delta,
            },
        }
    }

    /// The distance in meters from the centre to the shape's furthest point (a rectangle's
    /// corner, as if flat), which picks the step.
    fn radius(&self) -> f64 {
        let meters = match self.shape {
            Shape::Circle { radius } => radius,
            Shape::Rectangle { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        };
        meters * self.unit
    }

    /// The cells whose members the search reads, in Redis's order: the centre's, then its
    /// neighbours north, south, east, west, north-east, north-west, south-east, south-west,
    /// without those wholly outside the shape's bounds. A neighbour equal to the last one
    /// read is left out (at step 1 the grid wraps onto itself); the centre is not compared.
    pub fn cells(&self) -> Vec<Cell> {
        let bounds = self.bounds();
        let mut step = estimate_step(self.radius(), self.lat);
        let mut block = Block::around(self.lon, self.lat, step);
        if step > 1 && block.falls_short(bounds) {
            step -= 1;
            block = Block::around(self.lon, self.lat, step);
        }
        let mut cells: [Option<Cell>; 9] = block.cells.map(Some);
        if step >= 2 {
            block.leave_out_beyond(bounds, &mut cells);
        }
        let mut read = Vec::with_capacity(9);
        let mut previous = None;
        for (i, cell) in cells.into_iter().enumerate() {
            let Some(cell) = cell else { continue };
            if previous == Some(cell) {
                continue;
            }
            read.push(cell);
            previous = (i > 0).then_some(cell);
        }
        read
    }
}

/// The step whose cells are about the size of a search of `radius` meters: the number of
/// halvings from the Mercator width down to the radius, less 2 so that the 3 × 3 block
/// covers it, less 1 or 2 more towards the poles, where cells narrow; within 1 to 26.
fn estimate_step(radius: f64, lat: f64) -> u8 {
    if radius == 0.0 {
        return STEP_MAX;
    }
    let (mut range, mut step) = (radius, 1i32);
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

// The cells of a block, by position.
const CENTRE: usize = 0;
const NORTH: usize = 1;
const SOUTH: usize = 2;
const EAST: usize = 3;
const WEST: usize = 4;
const NORTH_EAST: usize = 5;
const NORTH_WEST: usize = 6;
const SOUTH_EAST: usize = 7;
const SOUTH_WEST: usize = 8;

/// A cell and its eight neighbours, in the order of the positions above.
struct Block {
    cells: [Cell; 9],
}

impl Block {
    fn around(lon: f64, lat: f64, step: u8) -> Block {
        let centre = Cell::holding(lon, lat, step, LATITUDES);
        let moves = [
            (0, 0),
            (0, 1),
            (0, -1),
            (1, 0),
            (-1, 0),
            (1, 1),
            (-1, 1),
            (1, -1),
            (-1, -1),
        ];
        Block {
            cells: moves.map(|(east, north)| centre.moved(east, north)),
        }
    }

    fn bounds(&self, at: usize) -> Bounds {
        self.cells[at].bounds(LATITUDES)
    }

    /// Whether the neighbours stop short of the shape's bounds on some side, so that the
    /// block misses part of it (a centre near its cell's edge with cells not much larger
    /// than the shape).
    fn falls_short(&self, bounds: Bounds) -> bool {
        self.bounds(NORTH).lat.max < bounds.lat.max
            || self.bounds(SOUTH).lat.min > bounds.lat.min
            || self.bounds(EAST).lon.max < bounds.lon.max
            || self.bounds(WEST).lon.min > bounds.lon.min
    }

    /// Leaves out the neighbours on a side where the centre cell already reaches past the
    /// shape's bounds.
    fn leave_out_beyond(&self, bounds: Bounds, cells: &mut [Option<Cell>; 9]) {
        let centre = self.bounds(CENTRE);
        let mut leave_out = |sides: [usize; 3]| {
            for side in sides {
                cells[side] = None;
            }
        };
        if centre.lat.min < bounds.lat.min {
            leave_out([SOUTH, SOUTH_WEST, SOUTH_EAST]);
        }
        if centre.lat.max > bounds.lat.max {
            leave_out([NORTH, NORTH_EAST, NORTH_WEST]);
        }
        if centre.lon.min < bounds.lon.min {
            leave_out([WEST, SOUTH_WEST, NORTH_WEST]);
        }
        if centre.lon.max > bounds.lon.max {
            leave_out([EAST, SOUTH_EAST, NORTH_EAST]);
        }
    }
}

#[cfg(test)]
mod tests {
    use tailstore_resp::format_human_exact;

    use super::*;

    fn text(hash: [u8; 11]) -> String {
        String::from_utf8_lossy(&hash).into_owned()
    }

    /// A position as GEOPOS writes it.
    fn shown((lon, lat): (f64, f64)) -> String {
        format!("{} {}", format_human_exact(lon), format_human_exact(lat))
    }

    /// Scores, positions and geohashes Redis 7.0.15 answered (GEOADD then ZSCORE, GEOPOS,
    /// GEOHASH): input longitude, latitude; score; GEOPOS's answer; GEOHASH's.
    const KNOWN: &[(f64, f64, f64, &str, &str)] = &[
        (
            13.361389,
            38.115556,
            3479099956230698.0,
            "13.36138933897018433 38.11555639549629859",
            "sqc8b49rny0",
        ),
        (
            15.087269,
            37.502669,
            3479447370796909.0,
            "15.08726745843887329 37.50266842333162032",
            "sqdtr74hyu0",
        ),
        (
            0.0,
            0.0,
            3377699720527872.0,
            "0.00000268220901489 0.00000126736058093",
            "s0000000000",
        ),
        (
            -180.0,
            -85.05112878,
            0.0,
            "-179.99999731779098511 -85.05112751263942528",
            "00bh0hbj200",
        ),
        // The grid's north-east corner is past its last cell in both indexes.
        (
            180.0,
            85.05112878,
            13510798882111488.0,
            "180 85.0511287799999991",
            "bp05b5048p0",
        ),
    ];

    #[test]
    fn positions_encode_decode_and_hash_as_redis_does() {
        for &(lon, lat, expected, answer, hash) in KNOWN {
            assert_eq!(score(lon, lat), expected, "score of {lon} {lat}");
            assert_eq!(shown(position(expected)), answer, "{lon} {lat}");
            assert_eq!(text(geohash(expected)), hash, "geohash of {lon} {lat}");
        }
    }

    #[test]
    fn a_position_decodes_to_its_cell_and_encodes_back_to_it() {
        let mut lon = -180.0;
        while lon <= 180.0 {
            let mut lat = LATITUDES.min;
            while lat <= LATITUDES.max {
                let stored = score(lon, lat);
                let (back_lon, back_lat) = position(stored);
                // A cell is 360 / 2^26 degrees wide and its centre half of that from a
                // position inside; one rounded across an edge is in the next cell.
                let (wide, high) = (360.0 / (1u64 << 26) as f64, 171.0 / (1u64 << 26) as f64);
                assert!((back_lon - lon).abs() <= wide, "{lon} {lat}: {back_lon}");
                assert!((back_lat - lat).abs() <= high, "{lon} {lat}: {back_lat}");
                if lon < 180.0 && lat < LATITUDES.max {
                    assert_eq!(score(back_lon, back_lat), stored, "{lon} {lat}");
                }
                lat += 7.3;
            }
            lon += 11.7;
        }
    }

    #[test]
    fn scores_zadd_wrote_decode_as_redis_reads_them() {
        // GEOPOS and GEOHASH of members ZADD gave these scores, in Redis 7.0.15 on x86-64.
        let zero = "-179.99999731779098511 -85.05112751263942528";
        let corner = "180 85.0511287799999991";
        let cases = [
            (-3.0, corner),
            (f64::INFINITY, zero),
            (f64::NEG_INFINITY, "180 -85.05112751263942528"),
            (1.5, "-179.99999731779098511 -85.05112497791824921"),
            (1e19, corner),
            (1e20, zero),
            (-0.5, zero),
            (
                4503599627370496.0,
                "-179.99999731779098511 85.0511287799999991",
            ),
            (9007199254740992.0, "180 -85.05112751263942528"),
        ];
        for (stored, answer) in cases {
            assert_eq!(shown(position(stored)), answer, "score {stored}");
        }
        assert_eq!(text(geohash(1.5)), "00bh0hbj210");
        assert_eq!(text(geohash(-3.0)), "bp05b5048p0");
    }

    #[test]
    fn interleaving_round_trips() {
        for v in [0u32, 1, 0x2aaa_aaaa, 0x0355_5555, u32::MAX, 1 << 26] {
            assert_eq!(gather(spread(v)), v);
            let cell = Cell::from_indexes(v, v.rotate_left(7), 26);
            assert_eq!(cell.indexes(), (v, v.rotate_left(7)));
        }
        assert_eq!(spread(0b111), 0b10101);
    }

    #[test]
    fn neighbours_wrap_around_the_grid() {
        let corner = Cell::from_indexes(0, 0, 2);
        assert_eq!(corner.moved(-1, 0).indexes(), (3, 0));
        assert_eq!(corner.moved(0, -1).indexes(), (0, 3));
        assert_eq!(corner.moved(1, 1).indexes(), (1, 1));
        // Past the east edge (longitude 180): a move east wraps to 1, a move north keeps it.
        let edge = Cell::from_indexes(4, 1, 2);
        assert_eq!(edge.moved(1, 0).indexes(), (1, 1));
        assert_eq!(edge.moved(-1, 0).indexes(), (3, 1));
        assert_eq!(edge.moved(0, 1).indexes(), (4, 2));
    }

    #[test]
    fn a_cell_covers_the_scores_of_its_sub_cells() {
        let cell = Cell::holding(13.361389, 38.115556, 10, LATITUDES);
        let (min, max) = cell.scores();
        let inside = score(13.361389, 38.115556);
        assert!(min <= inside && inside < max);
        assert_eq!(max - min, (1u64 << 32) as f64);
    }

    #[test]
    fn distances_are_redis_s() {
        // GEODIST Palermo Catania: 166274.1516 m in Redis.
        let (p, c) = (position(3479099956230698.0), position(3479447370796909.0));
        let d = distance(p.0, p.1, c.0, c.1);
        assert_eq!(format!("{d:.4}"), "166274.1516");
        assert_eq!(distance(1.0, 2.0, 1.0, 2.0), 0.0);
    }

    #[test]
    fn steps_follow_the_radius() {
        assert_eq!(estimate_step(0.0, 0.0), 26);
        assert_eq!(estimate_step(f64::INFINITY, 0.0), 1);
        // 1000 m doubles 15 times to pass the Mercator width: step 16, less 2.
        assert_eq!(estimate_step(1000.0, 0.0), 14);
        assert_eq!(estimate_step(1000.0, 70.0), 13);
        assert_eq!(estimate_step(1000.0, -81.0), 12);
        assert_eq!(estimate_step(1e-9, 0.0), 26);
    }

    #[test]
    fn a_search_reads_the_centre_first_and_no_cell_twice_in_a_row() {
        let region = Region {
            lon: 15.0,
            lat: 37.0,
            shape: Shape::Circle { radius: 200.0 },
            unit: 1000.0,
        };
        let cells = region.cells();
        assert_eq!(
            cells[0],
            Cell::holding(15.0, 37.0, cells[0].step, LATITUDES)
        );
        assert!(cells.windows(2).all(|pair| pair[0] != pair[1]));
        let everywhere = Region {
            shape: Shape::Circle {
                radius: f64::INFINITY,
            },
            ..region
        };
        // Step 1: a 2 × 2 grid, each cell read once after the centre.
        assert_eq!(everywhere.cells().len(), 4);
    }
}
