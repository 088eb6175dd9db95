// Rows of one string column of a Parquet file (UniRef50 ships as Parquet), streamed one record
// batch (64k rows) at a time through Apache Arrow / Parquet C++ — the libraries and headers of
// the `pyarrow` wheel (CMake option BIOFM_PARQUET, docs/DATA.md). Without them (BIOFM_WITH_PARQUET
// undefined) opening a Parquet file fails saying this biofm was built without Parquet.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace biofm {

bool parquet_supported();

class ParquetRows {
 public:
  // `column` (and `name_column`, if not empty) name string columns of the file's schema: an
  // exact match, else the only one differing in case. Throws naming the file.
  ParquetRows(const std::string& path, const std::string& column, const std::string& name_column);
  ~ParquetRows();
  ParquetRows(const ParquetRows&) = delete;
  ParquetRows& operator=(const ParquetRows&) = delete;

  // The next row: false at the end; a null value sets is_null (value and name are then empty).
  bool next(std::string& value, std::string& name, bool& is_null);
  uint64_t row() const;  // 1-based index of the row last returned

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace biofm
