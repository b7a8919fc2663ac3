// The reference for tests/unit/test_jaas.py: Kafka's JaasConfig tokenizer set-up and entry grammar
// (org.apache.kafka.common.security.JaasConfig) on java.io.StreamTokenizer, plus JaasContext's one-module rule.
// Reads one base64 text per line on stdin; prints per line "OK <module> <FLAG> <key>:<value> ..." or "ERR",
// every field base64.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.StreamTokenizer;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

public class JaasParse {
    static String b64(String s) {
        return Base64.getEncoder().encodeToString(s.getBytes(StandardCharsets.UTF_8));
    }

    static String entry(StreamTokenizer t) throws Exception {
        String module = t.sval;
        if (t.nextToken() == StreamTokenizer.TT_EOF) throw new IllegalArgumentException("no flag");
        String flag = t.sval;
        if (flag == null) throw new IllegalArgumentException("flag null");
        String upper = flag.toUpperCase(Locale.ROOT);
        if (!(upper.equals("REQUIRED") || upper.equals("REQUISITE") || upper.equals("SUFFICIENT") || upper.equals("OPTIONAL")))
            throw new IllegalArgumentException("bad flag");
        Map<String, String> options = new TreeMap<>();
        while (t.nextToken() != StreamTokenizer.TT_EOF && t.ttype != ';') {
            String key = t.sval;
            if (t.nextToken() != '=' || t.nextToken() == StreamTokenizer.TT_EOF || t.sval == null)
                throw new IllegalArgumentException("no value");
            options.put(String.valueOf(key), t.sval); // a null name reads "null", as in Java's messages
        }
        if (t.ttype != ';') throw new IllegalArgumentException("no semicolon");
        if (module == null || module.isEmpty()) throw new IllegalArgumentException("no module");
        StringBuilder out = new StringBuilder("OK " + b64(module) + " " + b64(upper));
        for (Map.Entry<String, String> e : options.entrySet()) {
            out.append(" ").append(b64(e.getKey())).append(":").append(b64(e.getValue()));
        }
        return out.toString();
    }

    static String parse(String text) {
        StreamTokenizer t = new StreamTokenizer(new StringReader(text));
        t.resetSyntax();
        t.wordChars(32, 128);
        t.wordChars(128 + 32, 255);
        t.ordinaryChar(';');
        t.ordinaryChar('=');
        t.whitespaceChars(0, ' ');
        t.commentChar('/');
        t.quoteChar('"');
        t.quoteChar('\'');
        t.slashSlashComments(true);
        t.slashStarComments(true);
        try {
            List<String> entries = new ArrayList<>();
            while (t.nextToken() != StreamTokenizer.TT_EOF) entries.add(entry(t));
            if (entries.size() != 1) return "ERR";
            return entries.get(0);
        } catch (Exception e) {
            return "ERR";
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String text = new String(Base64.getDecoder().decode(line), StandardCharsets.UTF_8);
            System.out.println(parse(text));
        }
    }
}
