//! `synth instances`: list the instance catalog as an aligned table, CSV or JSON.

use std::path::PathBuf;

use serde::Serialize;

use synth_core::catalog::{Catalog, Instance, InstanceParams, Libtype, Role};

/// Output format of the listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    Table,
    Csv,
    Json,
}

/// Which part of the catalog to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KindFilter {
    Legacy,
    Cktile,
    All,
}

#[derive(Debug, clap::Args)]
pub struct InstancesArgs {
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ListFormat,
    /// Which instances: CK legacy, CK-tile, or both.
    #[arg(long, value_enum, default_value = "all")]
    pub kind: KindFilter,
    /// Read the catalog from this directory instead of the built-in one (same two CSV files as ck-instances/).
    #[arg(long)]
    pub catalog: Option<PathBuf>,
}

/// One listed entry (the legacy default appears as its own row, marked as an alias).
#[derive(Debug, Clone, Serialize)]
pub struct ListingRow {
    pub libtype: Libtype,
    pub arch: Option<String>,
    pub id: i32,
    pub role: Role,
    /// For alias rows: the candidate id with the same kernel.
    pub alias_of: Option<i32>,
    pub tile: String,
    pub name: String,
    pub params: InstanceParams,
}

fn row(inst: &Instance, id: i32, role: Role, alias_of: Option<i32>) -> ListingRow {
    let (m, n, k) = inst.tile();
    ListingRow {
        libtype: inst.libtype(),
        arch: inst.arch.clone(),
        id,
        role,
        alias_of,
        tile: format!("{m}x{n}x{k}"),
        name: inst.name.clone(),
        params: inst.params.clone(),
    }
}

/// The catalog as listing rows: legacy candidates, the legacy default alias, then CK-tile entries.
pub fn listing(catalog: &Catalog, kind: KindFilter) -> Vec<ListingRow> {
    let mut rows = Vec::new();
    if kind != KindFilter::Cktile {
        rows.extend(catalog.legacy_candidates().iter().map(|i| row(i, i.id, i.role, None)));
        rows.push(row(catalog.default_instance(), -1, Role::Default, Some(catalog.default_alias)));
    }
    if kind != KindFilter::Legacy {
        // An entry repeating an earlier candidate of its architecture (or a default repeating any) is an alias.
        for inst in &catalog.cktile {
            let alias = catalog
                .cktile
                .iter()
                .filter(|o| o.role == Role::Candidate && o.arch == inst.arch && o.params == inst.params)
                .find(|o| inst.role == Role::Default || o.id < inst.id)
                .map(|o| o.id);
            rows.push(row(inst, inst.id, inst.role, alias));
        }
    }
    rows
}

/// Formats the listing as an aligned text table.
pub fn format_table(rows: &[ListingRow]) -> String {
    let header = ["libtype", "arch", "id", "role", "tile", "name"];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let role = match r.alias_of {
                Some(a) => format!("{} (= {a})", r.role),
                None => r.role.to_string(),
            };
            [
                r.libtype.to_string(),
                r.arch.clone().unwrap_or_else(|| "-".into()),
                r.id.to_string(),
                role,
                r.tile.clone(),
                r.name.clone(),
            ]
        })
        .collect();
    let mut t = synth_base::textable::TextTable::new(header.iter().map(|h| synth_base::textable::left(h)).collect());
    for c in cells {
        t.row(c);
    }
    t.render()
}

/// Formats the listing as CSV (`libtype,arch,id,role,alias_of,tile,name`).
pub fn format_csv(rows: &[ListingRow]) -> anyhow::Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(["libtype", "arch", "id", "role", "alias_of", "tile", "name"])?;
    for r in rows {
        w.write_record([
            r.libtype.to_string(),
            r.arch.clone().unwrap_or_default(),
            r.id.to_string(),
            r.role.to_string(),
            r.alias_of.map(|a| a.to_string()).unwrap_or_default(),
            r.tile.clone(),
            r.name.clone(),
        ])?;
    }
    Ok(String::from_utf8(w.into_inner()?)?)
}

pub fn run(args: InstancesArgs) -> anyhow::Result<()> {
    let catalog = match &args.catalog {
        Some(dir) => Catalog::load_dir(dir)?,
        None => Catalog::embedded(),
    };
    let rows = listing(&catalog, args.kind);
    let text = match args.format {
        ListFormat::Table => format_table(&rows),
        ListFormat::Csv => format_csv(&rows)?,
        ListFormat::Json => serde_json::to_string_pretty(&rows)? + "\n",
    };
    out!("{text}");
    Ok(())
}
