//! Redis's `bit` library for scripts (LuaBitOp's functions): 32-bit operations on Lua's
//! numbers, each argument first reduced to a signed 32-bit integer (`bit.tobit`).

use mlua::{Lua, Table, Variadic};

/// A number as LuaBitOp sees it: LuaBitOp adds 2^52 + 2^51 to the double, which rounds
/// it to an integer (ties to even) in the low bits of the sum's mantissa, and takes the
/// sum's low 32 bits. Past 2^51 the sum itself rounds, so `bit.tobit(2^53 + 2)` is 1, not
/// 2 (a remainder modulo 2^32 disagreed with Redis there).
fn tobit(x: f64) -> i32 {
    (x + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

/// The `bit` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let bit = lua.create_table()?;
    let fold = |op: fn(i32, i32) -> i32| {
        move |_: &Lua, (first, rest): (f64, Variadic<f64>)| {
            Ok(rest.iter().fold(tobit(first), |acc, &x| op(acc, tobit(x))))
        }
    };
    bit.raw_set("band", lua.create_function(fold(|a, b| a & b))?)?;
    bit.raw_set("bor", lua.create_function(fold(|a, b| a | b))?)?;
    bit.raw_set("bxor", lua.create_function(fold(|a, b| a ^ b))?)?;
    bit.raw_set("tobit", lua.create_function(|_, x: f64| Ok(tobit(x)))?)?;
    bit.raw_set("bnot", lua.create_function(|_, x: f64| Ok(!tobit(x)))?)?;
    bit.raw_set(
        "bswap",
        lua.create_function(|_, x: f64| Ok(tobit(x).swap_bytes()))?,
    )?;
    let shift = |op: fn(i32, u32) -> i32| {
        move |_: &Lua, (x, n): (f64, f64)| Ok(op(tobit(x), tobit(n) as u32 & 31))
    };
    bit.raw_set(
        "lshift",
        lua.create_function(shift(|x, n| ((x as u32) << n) as i32))?,
    )?;
    bit.raw_set(
        "rshift",
        lua.create_function(shift(|x, n| ((x as u32) >> n) as i32))?,
    )?;
    bit.raw_set("arshift", lua.create_function(shift(|x, n| x >> n))?)?;
    bit.raw_set(
        "rol",
        lua.create_function(shift(|x, n| (x as u32).rotate_left(n) as i32))?,
    )?;
    bit.raw_set(
        "ror",
        lua.create_function(shift(|x, n| (x as u32).rotate_right(n) as i32))?,
    )?;
    bit.raw_set(
        "tohex",
        lua.create_function(|_, (x, n): (f64, Option<f64>)| {
            let n = n.map_or(8, tobit);
            let digits = n.unsigned_abs().min(8) as usize;
            let value = tobit(x) as u32 as u64 & ((1u64 << (4 * digits)) - 1);
            Ok(if digits == 0 {
                // No digits asked for: LuaBitOp writes none.
                String::new()
            } else if n < 0 {
                format!("{value:0digits$X}")
            } else {
                format!("{value:0digits$x}")
            })
        })?,
    )?;
    Ok(bit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_match_luabitop() {
        let lua = Lua::new();
        lua.globals()
            .set("bit", library(&lua).expect("bit"))
            .expect("set");
        let eval = |code: &str| lua.load(code).eval::<String>().expect(code);
        assert_eq!(eval("return tostring(bit.band(7, 3))"), "3");
        assert_eq!(eval("return tostring(bit.bor(1, 2, 4))"), "7");
        assert_eq!(eval("return tostring(bit.bxor(5, 1))"), "4");
        assert_eq!(eval("return tostring(bit.bnot(0))"), "-1");
        assert_eq!(eval("return tostring(bit.tobit(2^32 + 1))"), "1");
        assert_eq!(eval("return tostring(bit.tobit(2^31))"), "-2147483648");
        // Past 2^51 LuaBitOp's sum rounds (values from Redis 7.0.15's `bit`).
        assert_eq!(eval("return tostring(bit.tobit(2^53 + 2))"), "1");
        assert_eq!(eval("return tostring(bit.tobit(2^52 + 3))"), "2");
        assert_eq!(eval("return bit.tohex(255, 0)"), "");
        assert_eq!(eval("return tostring(bit.lshift(1, 31))"), "-2147483648");
        assert_eq!(eval("return tostring(bit.rshift(-1, 28))"), "15");
        assert_eq!(eval("return tostring(bit.arshift(-256, 4))"), "-16");
        assert_eq!(
            eval("return tostring(bit.rol(0x12345678, 8))"),
            tobit(f64::from(0x3456_7812u32)).to_string()
        );
        assert_eq!(eval("return bit.tohex(255)"), "000000ff");
        assert_eq!(eval("return bit.tohex(-1, -4)"), "FFFF");
        assert_eq!(eval("return tostring(bit.bswap(0x12345678))"), "2018915346");
    }
}
