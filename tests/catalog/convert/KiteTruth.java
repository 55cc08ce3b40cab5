// What Java (and Kite, through it) computes for the values the conversion tests ask about.
// One request a line: a kind and Base64 (UTF-8) arguments, separated by tabs; one answer a
// line: "ok" and Base64 (UTF-8) results, separated by tabs. Compiled and run by test_kite_java.py.

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.InputStreamReader;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.text.NumberFormat;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Calendar;
import java.util.Date;
import java.util.List;
import java.util.Properties;
import java.util.TimeZone;
import java.util.TreeSet;

public class KiteTruth {
  private static final TimeZone UTC = TimeZone.getTimeZone("UTC");

  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    StringBuilder out = new StringBuilder();
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      String[] parts = line.split("\t", -1);
      List<String> a = new ArrayList<>();
      for (int i = 1; i < parts.length; i++) {
        a.add(new String(Base64.getDecoder().decode(parts[i]), StandardCharsets.UTF_8));
      }
      out.append("ok");  // an answer may have no results
      for (String result : answer(parts[0], a)) {
        out.append('\t');
        out.append(Base64.getEncoder().encodeToString(result.getBytes(StandardCharsets.UTF_8)));
      }
      out.append('\n');
    }
    System.out.print(out);
  }

  static int bucket(Object value, int buckets) {
    return (value.hashCode() & Integer.MAX_VALUE) % buckets;  // HashFieldPartitioner.apply
  }

  // org.apache.avro.util.Utf8.hashCode() of Avro 1.7, on Kite's classpath (Avro 1.12.1 and later
  // start from 1, AVRO-4061)
  static int avro17Utf8Hash(String s) {
    int hash = 0;
    for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
      hash = hash * 31 + b;
    }
    return hash;
  }

  static List<String> answer(String kind, List<String> a) throws Exception {
    List<String> r = new ArrayList<>();
    switch (kind) {
      case "hash-string": {
        int buckets = Integer.parseInt(a.get(1));
        r.add(Integer.toString(bucket(a.get(0), buckets)));
        r.add(Integer.toString((avro17Utf8Hash(a.get(0)) & Integer.MAX_VALUE) % buckets));
        break;
      }
      case "hash-long":
        r.add(Integer.toString(bucket(Long.valueOf(a.get(0)), Integer.parseInt(a.get(1)))));
        break;
      case "hash-int":
        r.add(Integer.toString(bucket(Integer.valueOf(a.get(0)), Integer.parseInt(a.get(1)))));
        break;
      case "calendar": {  // CalendarFieldPartitioner and its subclasses, the path text Kite writes
        Calendar cal = Calendar.getInstance(UTC);
        cal.setTimeInMillis(Long.parseLong(a.get(0)));
        NumberFormat two = NumberFormat.getInstance();
        two.setMinimumIntegerDigits(2);
        two.setGroupingUsed(false);
        r.add(Integer.toString(cal.get(Calendar.YEAR)));
        r.add(two.format(cal.get(Calendar.MONTH) + 1));
        r.add(two.format(cal.get(Calendar.DAY_OF_MONTH)));
        r.add(two.format(cal.get(Calendar.HOUR_OF_DAY)));
        r.add(two.format(cal.get(Calendar.MINUTE)));
        break;
      }
      case "dateFormat": {  // DateFormatPartitioner
        SimpleDateFormat format = new SimpleDateFormat(a.get(1));
        format.setTimeZone(UTC);
        r.add(format.format(new Date(Long.parseLong(a.get(0)))));
        break;
      }
      case "fixedSizeRange": {  // LongFixedSizeRangeFieldPartitioner.apply
        long value = Long.parseLong(a.get(0));
        long size = Long.parseLong(a.get(1));
        r.add(Long.toString(Math.round(Math.floor(value / ((double) size))) * size));
        break;
      }
      case "url":  // PathConversion.valueToString
        r.add(URLEncoder.encode(a.get(0), "UTF-8"));
        break;
      case "properties": {  // FileSystemMetadataProvider.load: Properties.load(InputStream)
        Properties p = new Properties();
        try {
          p.load(new ByteArrayInputStream(a.get(0).getBytes(StandardCharsets.ISO_8859_1)));
        } catch (IllegalArgumentException e) {
          r.add("ERROR");
          break;
        }
        for (String key : new TreeSet<>(p.stringPropertyNames())) {
          r.add(key);
          r.add(p.getProperty(key));
        }
        break;
      }
      default:
        throw new IllegalArgumentException("unknown request " + kind);
    }
    return r;
  }
}
