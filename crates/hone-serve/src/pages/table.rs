//! The run page's experiment table: its view as the URL gives it ([`Table`]: status filter,
//! sort column and direction, page), the links that change one part of it, and its HTML
//! (filter bar, sortable header, rows, pager). Sorting, filtering and paging happen in SQL.

use std::fmt::Write as _;

use hone::report::fmt_metric;
use hone::store::{ExperimentQuery, ExperimentRecord, SortKey, Status};

use super::RunView;
use crate::db::AppError;
use crate::html::{badge, cost, duration_ms, esc, short, url};

/// Rows per table page unless asked otherwise, and the most one page may hold.
const PER_PAGE: u64 = 50;
const MAX_PER_PAGE: u64 = 500;

/// The experiment table's query parameters, as they come in the URL.
#[derive(serde::Deserialize, Default, Clone, Debug)]
pub(crate) struct TableParams {
    status: Option<String>,
    sort: Option<String>,
    dir: Option<String>,
    page: Option<u64>,
    per: Option<u64>,
}

/// The experiment table's view: filter, order and page.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Table {
    pub status: Option<Status>,
    pub sort: SortKey,
    pub descending: bool,
    /// 1-based.
    pub page: u64,
    pub per: u64,
}

impl Table {
    pub fn parse(p: &TableParams) -> Result<Table, AppError> {
        let status = match p.status.as_deref() {
            None | Some("") | Some("all") => None,
            Some(s) => Some(Status::parse(s).ok_or_else(|| {
                AppError::BadRequest(format!(
                    "unknown status `{s}`; use one of running, {}",
                    listed(Status::ALL.iter().map(|s| s.as_str()))
                ))
            })?),
        };
        let sort = match p.sort.as_deref() {
            None | Some("") => SortKey::Number,
            Some(s) => SortKey::parse(s).ok_or_else(|| {
                AppError::BadRequest(format!(
                    "cannot sort by `{s}`; use one of {}",
                    listed(SortKey::ALL.iter().map(|k| k.as_str()))
                ))
            })?,
        };
        let descending = match p.dir.as_deref() {
            None | Some("") => sort == SortKey::Number,
            Some("desc") => true,
            Some("asc") => false,
            Some(d) => {
                return Err(AppError::BadRequest(format!(
                    "dir must be asc or desc, not `{d}`"
                )))
            }
        };
        Ok(Table {
            status,
            sort,
            descending,
            page: p.page.unwrap_or(1).max(1),
            per: p.per.unwrap_or(PER_PAGE).clamp(1, MAX_PER_PAGE),
        })
    }

    pub fn query(&self) -> ExperimentQuery {
        ExperimentQuery {
            status: self.status,
            sort: self.sort,
            descending: self.descending,
            limit: self.per,
            offset: (self.page - 1).saturating_mul(self.per),
        }
    }

    /// The default view, newest first on the first page, every status: the one a live update
    /// can bring up to date with the changed rows alone.
    pub fn newest_first(&self) -> bool {
        self.status.is_none() && self.sort == SortKey::Number && self.descending && self.page == 1
    }

    /// This view's query string (non-default parts only), with `edit` applied first.
    pub fn href(&self, edit: impl FnOnce(&mut Table)) -> String {
        let mut t = self.clone();
        edit(&mut t);
        let mut q = form_urlencoded::Serializer::new(String::new());
        if let Some(s) = t.status {
            q.append_pair("status", s.as_str());
        }
        if t.sort != SortKey::Number {
            q.append_pair("sort", t.sort.as_str());
        }
        if t.descending != (t.sort == SortKey::Number) {
            q.append_pair("dir", if t.descending { "desc" } else { "asc" });
        }
        if t.page != 1 {
            q.append_pair("page", &t.page.to_string());
        }
        if t.per != PER_PAGE {
            q.append_pair("per", &t.per.to_string());
        }
        let q = q.finish();
        if q.is_empty() {
            "?".into()
        } else {
            format!("?{q}")
        }
    }
}

/// Names for an error message: `a, b, c`.
fn listed(names: impl Iterator<Item = &'static str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

/// The experiment table with its filter bar and pager.
pub(crate) fn table_html(v: &RunView) -> String {
    let tag = url(&v.run.tag);
    let mut out = filter_bar(v);
    out.push_str(&table_head(v));
    for e in &v.rows {
        out.push_str(&experiment_row(v, &tag, e));
    }
    if v.rows.is_empty() {
        out.push_str(r#"<tr><td colspan="7" class="note">no experiments match</td></tr>"#);
    }
    out.push_str("</tbody></table>\n");
    out.push_str(&pager(v));
    out
}

/// The status filter: all, then each status the run has, with its count.
pub(crate) fn filter_bar(v: &RunView) -> String {
    let t = &v.table;
    let mut out = String::from(r#"<div class="filters"><span class="dim">status:</span> "#);
    let all_count = v.summary.experiments;
    let _ = write!(
        out,
        r#"<a class="filter{}" href="{}">all {all_count}</a> "#,
        if t.status.is_none() { " on" } else { "" },
        esc(&v.links.to(&t.href(|t| {
            t.status = None;
            t.page = 1
        })))
    );
    for st in std::iter::once(&Status::Running).chain(Status::ALL) {
        let Some(c) = v.summary.counts.get(st.as_str()) else {
            continue;
        };
        let _ = write!(
            out,
            r#"<a class="filter{}" href="{}">{} {c}</a> "#,
            if t.status == Some(*st) { " on" } else { "" },
            esc(&v.links.to(&t.href(|t| {
                t.status = Some(*st);
                t.page = 1
            }))),
            esc(st.as_str())
        );
    }
    out.push_str("</div>\n");
    out
}

/// The table's opening and its header, each sortable column a link that sorts by it.
fn table_head(v: &RunView) -> String {
    let t = &v.table;
    let mut out = String::new();
    let header = |key: SortKey, label: &str, class: &str| {
        let active = t.sort == key;
        let arrow = match (active, t.descending) {
            (true, true) => " ▼",
            (true, false) => " ▲",
            _ => "",
        };
        // A second click on the active column flips it; a new column starts in its natural order.
        let href = v.links.to(&t.href(|t| {
            t.descending = if active {
                !t.descending
            } else {
                key == SortKey::Number
            };
            t.sort = key;
            t.page = 1;
        }));
        format!(
            r#"<th class="{class}"><a href="{}" data-sort="{}">{}{arrow}</a></th>"#,
            esc(&href),
            key.as_str(),
            esc(label)
        )
    };
    let _ = write!(
        out,
        r#"<table class="grid experiments" id="experiments" data-per="{}"><thead><tr>{}{}{}<th>description</th><th class="num">lines</th>{}{}</tr></thead><tbody>"#,
        t.per,
        header(SortKey::Number, "#", "num"),
        header(SortKey::Status, "status", ""),
        header(SortKey::Objective, &v.run.metric, "num"),
        header(SortKey::Duration, "time", "num"),
        header(SortKey::Cost, "cost", "num"),
    );
    out
}

/// The rows numbered `since` or more, newest first: what a live update of the default view
/// sends (the rows in flight the page showed, and the new ones).
pub(crate) fn rows_since(v: &RunView, since: u64) -> String {
    let tag = url(&v.run.tag);
    v.rows
        .iter()
        .filter(|e| e.n >= since)
        .map(|e| experiment_row(v, &tag, e))
        .collect()
}

/// One experiment's row, linking to its page.
fn experiment_row(v: &RunView, tag: &str, e: &ExperimentRecord) -> String {
    let mut out = String::new();
    let link = esc(&v.links.to(&format!("/runs/{tag}/experiments/{}", e.n)));
    let desc = if e.description.is_empty() {
        e.reason.as_str()
    } else {
        e.description.as_str()
    };
    let _ = write!(
        out,
        r#"<tr id="exp-{n}" data-n="{n}" class="r-{status}"><td class="num"><a href="{link}">{n}</a></td><td>{badge}</td><td class="num">{value}</td><td class="desc"><a href="{link}" title="{full}">{desc}</a></td><td class="num lines"><span class="plus">+{add}</span> <span class="minus">−{del}</span></td><td class="num">{time}</td><td class="num">{cost}</td></tr>"#,
        n = e.n,
        status = e.status().as_str(),
        badge = badge(e.status().as_str()),
        value = fmt_metric(e.objective),
        full = esc(desc),
        desc = esc(&short(desc, 110)),
        add = e.lines_added,
        del = e.lines_deleted,
        time = if e.total_ms > 0 {
            duration_ms(e.total_ms)
        } else {
            "-".into()
        },
        cost = cost(e.cost_usd),
    );
    out
}

/// Where this page is among the matching experiments, and links to the others.
pub(crate) fn pager(v: &RunView) -> String {
    let t = &v.table;
    let mut out = String::new();
    let pages = v.matching.div_ceil(t.per).max(1);
    let first = (t.page - 1) * t.per + 1;
    let last = (first + v.rows.len() as u64).saturating_sub(1);
    let _ = write!(
        out,
        r#"<div class="pager"><span class="dim">{}–{} of {}</span> "#,
        first.min(v.matching),
        last,
        v.matching
    );
    let link = |out: &mut String, label: &str, to: u64, enabled: bool| {
        if enabled {
            let _ = write!(
                out,
                r#"<a href="{}">{label}</a> "#,
                esc(&v.links.to(&t.href(|t| t.page = to)))
            );
        } else {
            let _ = write!(out, r#"<span class="off">{label}</span> "#);
        }
    };
    link(&mut out, "« first", 1, t.page > 1);
    link(&mut out, "‹ prev", t.page.saturating_sub(1), t.page > 1);
    let _ = write!(
        out,
        r#"<span class="at">page {} of {pages}</span> "#,
        t.page
    );
    link(&mut out, "next ›", t.page + 1, t.page < pages);
    link(&mut out, "last »", pages, t.page < pages);
    out.push_str("</div>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_links_keep_the_view_and_drop_defaults() {
        let t = Table::parse(&TableParams::default()).unwrap();
        assert_eq!(t.href(|_| {}), "?");
        assert!(t.descending, "newest first by default");
        let p = TableParams {
            status: Some("keep".into()),
            sort: Some("objective".into()),
            page: Some(3),
            ..Default::default()
        };
        let t = Table::parse(&p).unwrap();
        assert!(!t.descending);
        assert_eq!(t.query().offset, 100);
        assert_eq!(t.href(|t| t.page = 4), "?status=keep&sort=objective&page=4");
        let bad = TableParams {
            status: Some("<x>".into()),
            ..Default::default()
        };
        assert!(Table::parse(&bad).is_err());
    }
}
